#!/usr/bin/python3
"""Writes tests/model/fixtures/megatron_schedule.txt: the learning rate, global batch and data
position of every step, and the validation samples every evaluation reads, of small runs of
Megatron-DeepSpeed's training loop (BigScience fork), computed by a transcription of its code:
megatron/learning_rates.py AnnealingLR (step-, sample- and token-based), megatron/microbatches.py
RampupBatchsizeNumMicroBatches, training.py update_train_iters / get_learning_rate_scheduler /
train / train_step / evaluate (the non-DeepSpeed path with a loss scaler, whose skipped
iterations do not step the scheduler) and data/data_samplers.py MegatronPretrainingSampler.
tests/model/megatron_schedule_test.cc compares anvil's LrScheduler, batch_schedule and Trainer
with it exactly.

Run with Debian's python3 (standard library only):
    /usr/bin/python3 scripts/make_megatron_schedule_fixture.py [out_file]

Output, one record per line, fields separated by spaces:
    case NAME                        a new case; then its parameters:
    param KEY VALUE                  micro_batch, dp, global_batch, seq_len, train_iters or
                                     train_samples, rampup (START,INCREMENT,SAMPLES or -),
                                     lr, min_lr, decay_style, warmup_iters / warmup_samples,
                                     decay_iters / decay_samples, decay_tokens (0 = off),
                                     eval_interval, eval_iters, skipped (iterations whose update
                                     is skipped, comma-separated, or -)
    steps N                          the resolved train_iters
    step K G CONSUMED LR SKIPPED     iteration K (from 1): its global batch, the samples
                                     consumed before it, the lr its update uses (repr: exact),
                                     1 when its update is skipped
    eval K RANK FIRST ...            the evaluation after iteration K (K = -1: the one after
                                     the loop): the first sample of every micro-batch that DP
                                     rank RANK reads, in order (each micro-batch is
                                     micro_batch consecutive samples)
    end
"""
import math
import os
import sys


# --- megatron/microbatches.py ------------------------------------------------------------------
class ConstantNumMicroBatches:
    def __init__(self, global_batch_size, micro_batch_size, data_parallel_size):
        micro_batch_times_data_parallel = micro_batch_size * data_parallel_size
        assert global_batch_size % micro_batch_times_data_parallel == 0
        self.num_micro_batches = global_batch_size // micro_batch_times_data_parallel
        self.current_global_batch_size = global_batch_size

    def update(self, consumed_samples, consistency_check):
        pass


class RampupBatchsizeNumMicroBatches:
    def __init__(self, start_batch_size, batch_size_increment, ramup_samples,
                 global_batch_size, micro_batch_size, data_parallel_size):
        self.micro_batch_size = micro_batch_size
        self.data_parallel_size = data_parallel_size
        self.micro_batch_times_data_parallel_size = self.micro_batch_size * \
            self.data_parallel_size
        assert self.micro_batch_times_data_parallel_size > 0
        assert start_batch_size > 0
        self.start_batch_size = start_batch_size
        assert global_batch_size > 0
        self.global_batch_size = global_batch_size
        diff_batch_size = self.global_batch_size - self.start_batch_size
        assert diff_batch_size >= 0
        assert batch_size_increment > 0
        self.batch_size_increment = batch_size_increment
        assert diff_batch_size % batch_size_increment == 0
        num_increments = diff_batch_size // self.batch_size_increment
        self.ramup_samples = ramup_samples
        assert self.ramup_samples >= 0
        self.rampup_samples_per_increment = self.ramup_samples / num_increments
        self.update(0, False)

    def update(self, consumed_samples, consistency_check):
        if consumed_samples > self.ramup_samples:
            self.current_global_batch_size = self.global_batch_size
        else:
            steps = int(consumed_samples / self.rampup_samples_per_increment)
            self.current_global_batch_size = self.start_batch_size + \
                steps * self.batch_size_increment
            assert self.current_global_batch_size <= self.global_batch_size
        if consistency_check:
            assert self.current_global_batch_size % \
                self.micro_batch_times_data_parallel_size == 0
        self.num_micro_batches = self.current_global_batch_size // \
            self.micro_batch_times_data_parallel_size


# --- megatron/learning_rates.py (args.consumed_train_tokens passed in explicitly) -------------
class AnnealingLR:
    def __init__(self, run, max_lr, min_lr, warmup_steps, decay_steps, decay_style,
                 decay_tokens):
        self.run = run
        self.max_lr = float(max_lr)
        self.min_lr = min_lr
        assert self.min_lr >= 0.0
        assert self.max_lr >= self.min_lr
        self.warmup_steps = warmup_steps
        self.num_steps = 0
        self.decay_steps = decay_steps
        assert self.decay_steps > 0
        assert self.warmup_steps < self.decay_steps
        self.decay_tokens = decay_tokens
        self.num_tokens = 0
        self.warmup_tokens = 0
        self.decay_style = decay_style
        self.lr = None
        self.step(0)

    def get_lr(self):
        if self.warmup_steps > 0 and self.num_steps <= self.warmup_steps:
            if self.num_steps == self.warmup_steps and \
                    self.decay_tokens is not None:
                self.warmup_tokens = self.num_tokens
            return self.max_lr * float(self.num_steps) / \
                float(self.warmup_steps)
        if self.decay_style == 'constant':
            return self.max_lr
        if self.decay_tokens is None:
            if self.num_steps > self.decay_steps:
                return self.min_lr
            num_steps_ = self.num_steps - self.warmup_steps
            decay_steps_ = self.decay_steps - self.warmup_steps
            decay_ratio = float(num_steps_) / float(decay_steps_)
        else:
            if self.num_tokens > self.decay_tokens:
                return self.min_lr
            num_tokens_ = self.num_tokens - self.warmup_tokens
            decay_tokens_ = self.decay_tokens - self.warmup_tokens
            decay_ratio = float(num_tokens_) / float(decay_tokens_)
        assert decay_ratio >= 0.0
        assert decay_ratio <= 1.0
        delta_lr = self.max_lr - self.min_lr
        if self.decay_style == 'linear':
            coeff = (1.0 - decay_ratio)
        elif self.decay_style == 'cosine':
            coeff = 0.5 * (math.cos(math.pi * decay_ratio) + 1.0)
        else:
            raise Exception('{} decay style is not supported.'.format(self.decay_style))
        return self.min_lr + coeff * delta_lr

    def step(self, increment, token_num=None):
        if token_num is None:
            token_num = self.run.consumed_train_tokens
        self.num_tokens = token_num
        self.num_steps += increment
        self.lr = self.get_lr()


# --- training.py, data_samplers.py ------------------------------------------------------------
class Run:
    """The args of one run and Megatron's loop over them."""

    def __init__(self, p):
        self.p = p
        self.consumed_train_samples = 0
        self.consumed_valid_samples = 0
        self.consumed_train_tokens = 0
        B, dp, G = p['micro_batch'], p['dp'], p['global_batch']
        if p.get('rampup'):
            s, i, n = p['rampup']
            self.calc = RampupBatchsizeNumMicroBatches(s, i, n, G, B, dp)
        else:
            self.calc = ConstantNumMicroBatches(G, B, dp)
        self.train_iters = p.get('train_iters')
        self.scheduler = self.get_learning_rate_scheduler()

    def update_train_iters(self):
        p = self.p
        if self.train_iters:
            return
        if not p.get('rampup'):
            self.train_iters = p['train_samples'] // p['global_batch']
        else:
            iterations = 0
            consumed_samples = 0
            while consumed_samples <= int(p['rampup'][2]):
                self.calc.update(consumed_samples, False)
                consumed_samples += self.calc.current_global_batch_size
                iterations += 1
            self.calc.update(0, False)
            iterations += (p['train_samples'] - consumed_samples) // p['global_batch']
            self.train_iters = iterations

    def get_learning_rate_scheduler(self):
        p = self.p
        G = p['global_batch']
        if self.train_iters:
            decay_iters = p.get('decay_iters') or self.train_iters
            decay_steps = decay_iters * G
            warmup_steps = p.get('warmup_iters', 0) * G
        else:
            self.update_train_iters()
            decay_steps = p.get('decay_samples') or p['train_samples']
            warmup_steps = p.get('warmup_samples', 0)
        return AnnealingLR(self, p['lr'], p['min_lr'], warmup_steps, decay_steps,
                           p['decay_style'], p.get('decay_tokens') or None)

    def sampler_batches(self, consumed, rank, count):
        """MegatronPretrainingSampler from `consumed`: the first sample of the `count` next
        micro-batches of DP rank `rank`."""
        B, dp = self.p['micro_batch'], self.p['dp']
        return [consumed + k * B * dp + rank * B for k in range(count)]

    def evaluate(self, label, out):
        p = self.p
        n = p['eval_iters'] * self.calc.num_micro_batches
        for rank in range(p['dp']):
            out.append('eval %d %d %s' % (label, rank, ' '.join(
                str(i) for i in self.sampler_batches(self.consumed_valid_samples, rank, n))))
        self.consumed_valid_samples += p['dp'] * p['micro_batch'] * n

    def train(self, out):
        p = self.p
        skipped = set(p.get('skipped', []))
        iteration = 0
        while iteration < self.train_iters:
            self.calc.update(self.consumed_train_samples, True)
            G = self.calc.current_global_batch_size
            lr = self.scheduler.lr  # optimizer.param_groups[0]['lr'] during train_step
            update_successful = (iteration + 1) not in skipped
            if update_successful:
                increment = self.calc.num_micro_batches * p['micro_batch'] * p['dp']
                self.scheduler.step(increment=increment)
            out.append('step %d %d %d %r %d' % (iteration + 1, G, self.consumed_train_samples, lr,
                                                0 if update_successful else 1))
            iteration += 1
            new_samples = p['dp'] * p['micro_batch'] * self.calc.num_micro_batches
            self.consumed_train_samples += new_samples
            self.consumed_train_tokens += new_samples * p['seq_len']
            if p['eval_interval'] and iteration % p['eval_interval'] == 0:
                self.evaluate(iteration, out)
        self.evaluate(-1, out)


CASES = [
    ('iteration_cosine', dict(micro_batch=2, dp=1, global_batch=8, seq_len=16, train_iters=12,
                              lr=1e-2, min_lr=1e-3, decay_style='cosine', warmup_iters=3,
                              decay_iters=10, eval_interval=4, eval_iters=2)),
    ('iteration_linear_dp2_skips', dict(micro_batch=2, dp=2, global_batch=8, seq_len=16,
                                        train_iters=10, lr=3e-3, min_lr=0.0,
                                        decay_style='linear', warmup_iters=2, eval_interval=3,
                                        eval_iters=1, skipped=[2, 5, 6])),
    ('samples_rampup', dict(micro_batch=2, dp=1, global_batch=16, seq_len=8, train_samples=200,
                            rampup=(4, 4, 60), lr=1e-3, min_lr=1e-4, decay_style='linear',
                            warmup_samples=24, decay_samples=150, eval_interval=5,
                            eval_iters=1)),
    ('tokens_rampup', dict(micro_batch=2, dp=1, global_batch=8, seq_len=16, train_samples=120,
                           rampup=(2, 2, 30), lr=2e-3, min_lr=2e-4, decay_style='cosine',
                           warmup_samples=10, decay_tokens=1500, eval_interval=6,
                           eval_iters=2, skipped=[4])),
    ('samples_warmup_equals_position', dict(micro_batch=4, dp=1, global_batch=8, seq_len=4,
                                            train_samples=96, lr=5e-3, min_lr=5e-4,
                                            decay_style='cosine', warmup_samples=16,
                                            decay_tokens=300, eval_interval=0, eval_iters=1)),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, '..', 'tests', 'model', 'fixtures', 'megatron_schedule.txt')
    out = ['# Generated by scripts/make_megatron_schedule_fixture.py; do not edit.']
    for name, p in CASES:
        run = Run(p)
        out.append('case ' + name)
        for key in ('micro_batch', 'dp', 'global_batch', 'seq_len', 'train_iters',
                    'train_samples', 'lr', 'min_lr', 'decay_style', 'warmup_iters',
                    'warmup_samples', 'decay_iters', 'decay_samples', 'decay_tokens',
                    'eval_interval', 'eval_iters'):
            if key in p:
                out.append('param %s %r' % (key, p[key]) if isinstance(p[key], float)
                           else 'param %s %s' % (key, p[key]))
        out.append('param rampup %s' % (','.join(str(v) for v in p['rampup'])
                                        if p.get('rampup') else '-'))
        out.append('param skipped %s' % (','.join(str(v) for v in p['skipped'])
                                         if p.get('skipped') else '-'))
        out.append('steps %d' % run.train_iters)
        run.train(out)
        out.append('end')
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, 'w') as f:
        f.write('\n'.join(out) + '\n')
    print('wrote', out_path)


if __name__ == '__main__':
    main()
