// main() for the multi-rank tests in tests/parallel/, run as `mpirun -np N <test>`:
//   MPI_Init; every rank runs every test (tests call collectives in the same order on all
//   ranks, so none may return early before its collectives); rank 0 prints gtest's usual
//   output, other ranks print only their failures, prefixed with the rank; the exit status is
//   non-zero when any test failed on any rank (the results are reduced with MPI_MAX).
#include <mpi.h>

#include <cstdio>
#include <string>

#include "engine/status.h"
#include "gtest/gtest.h"

namespace {

// Prints failed assertions of a non-zero rank, which has no default printer.
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // The test's name is recorded here: OnTestPartResult runs under gtest's lock, so it must not
  // call UnitTest::current_test_info().
  void OnTestStart(const testing::TestInfo& t) override {
    test_ = std::string(t.test_suite_name()) + "." + t.name();
  }
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s failed at %s:%d\n%s\n", rank_, test_.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  anvil::engine::set_process_rank(rank);
  testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) {
    std::fprintf(stderr, "tests failed on other ranks (see their [rank N] lines on stderr)\n");
  }
  if (rank == 0) std::printf("[%d ranks] %s\n", world, any_failed ? "FAILED" : "PASSED");
  MPI_Finalize();
  return any_failed;
}
