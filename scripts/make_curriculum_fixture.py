#!/usr/bin/python3
"""Writes tests/model/fixtures/curriculum_schedule.txt: the curriculum sequence length of every
step of small runs, computed by a transcription of DeepSpeed's CurriculumScheduler
(deepspeed/runtime/data_pipeline/curriculum_scheduler.py) driven as Megatron-DeepSpeed's
training loop drives it (megatron/training.py train(): before each step,
args.curriculum_seqlen = args.curriculum_scheduler.update_difficulty(args.iteration + 1)).
tests/model/curriculum_test.cc compares anvil's curriculum_seqlen with it exactly.

Run with Debian's python3 (standard library only):
    /usr/bin/python3 scripts/make_curriculum_fixture.py [out_file]

Output, one record per line, fields separated by spaces:
    case NAME                 a new case; then its parameters:
    param KEY VALUE           schedule (fixed_linear | fixed_root | fixed_discrete),
                              min_difficulty, max_difficulty, and total_curriculum_step,
                              difficulty_step, root_degree or difficulty, max_step (lists
                              comma-separated)
    step S SEQLEN             iteration S (from 1) trains on SEQLEN tokens per sample
    end
"""
import math
import os
import sys


# --- deepspeed/runtime/data_pipeline/curriculum_scheduler.py (constants inlined) --------------
class CurriculumScheduler:
    def __init__(self, config):
        self.state = {}
        assert 'min_difficulty' in config
        assert 'max_difficulty' in config
        assert 'schedule_type' in config
        self.state['min_difficulty'] = config['min_difficulty']
        self.state['max_difficulty'] = config['max_difficulty']
        self.state['current_difficulty'] = config['min_difficulty']
        self.state['schedule_type'] = config['schedule_type']
        sc = config['schedule_config']
        if config['schedule_type'] == 'fixed_discrete':
            assert 'difficulty' in sc and 'max_step' in sc
            assert len(sc['max_step']) > 0
            assert len(sc['difficulty']) > 0
            assert len(sc['difficulty']) == len(sc['max_step']) + 1
        elif config['schedule_type'] == 'fixed_root':
            assert 'total_curriculum_step' in sc and 'difficulty_step' in sc
            assert 'root_degree' in sc
        elif config['schedule_type'] == 'fixed_linear':
            assert 'total_curriculum_step' in sc and 'difficulty_step' in sc
        else:
            raise RuntimeError('Unsupported curriculum schedule type')
        self.state['schedule_config'] = sc

    def __fixed_discrete_get_difficulty(self, global_steps):
        s_state = self.state['schedule_config']
        if global_steps > s_state['max_step'][-1]:
            return s_state['difficulty'][-1]
        for i in range(len(s_state['max_step'])):
            if global_steps <= s_state['max_step'][i]:
                return s_state['difficulty'][i]

    def __fixed_root_get_difficulty(self, global_steps, root_degree=None):
        s_state = self.state['schedule_config']
        if root_degree is None:
            root_degree = s_state['root_degree']
        next_difficulty = (float(global_steps) / s_state['total_curriculum_step'])**(1.0 / root_degree)
        next_difficulty = math.floor(next_difficulty *
                                     (self.state['max_difficulty'] - self.state['min_difficulty']) +
                                     self.state['min_difficulty'])
        next_difficulty -= (next_difficulty % s_state['difficulty_step'])
        next_difficulty = min(next_difficulty, self.state['max_difficulty'])
        return next_difficulty

    def get_difficulty(self, global_steps):
        t = self.state['schedule_type']
        if t == 'fixed_discrete':
            return self.__fixed_discrete_get_difficulty(global_steps)
        elif t == 'fixed_linear':
            return self.__fixed_root_get_difficulty(global_steps, 1)
        elif t == 'fixed_root':
            return self.__fixed_root_get_difficulty(global_steps)
        raise RuntimeError('Unsupported curriculum schedule type')

    def update_difficulty(self, global_steps):
        if self.state['current_difficulty'] < self.state['max_difficulty']:
            self.state['current_difficulty'] = self.get_difficulty(global_steps)
        return self.state['current_difficulty']


# --- the cases --------------------------------------------------------------------------------
CASES = [
    # examples/curriculum_learning/ds_config_cl.json's shape, shortened.
    ('linear_example', 'fixed_linear', 8, 1024, {'total_curriculum_step': 60, 'difficulty_step': 8},
     80),
    # max not a multiple of difficulty_step: the length stops at 200 < max, the scheduler never
    # freezes.
    ('linear_unreached_max', 'fixed_linear', 16, 203,
     {'total_curriculum_step': 37, 'difficulty_step': 8}, 60),
    ('linear_step1', 'fixed_linear', 3, 50, {'total_curriculum_step': 29, 'difficulty_step': 1}, 40),
    ('root2', 'fixed_root', 8, 512, {'total_curriculum_step': 100, 'difficulty_step': 8,
                                     'root_degree': 2}, 130),
    ('root3', 'fixed_root', 64, 1024, {'total_curriculum_step': 1000, 'difficulty_step': 16,
                                       'root_degree': 3}, 1200),
    ('discrete', 'fixed_discrete', 16, 128, {'difficulty': [16, 64, 128], 'max_step': [5, 12]},
     20),
    # Not monotone: once 64 (= max) is reached the scheduler keeps it.
    ('discrete_sticky', 'fixed_discrete', 8, 64,
     {'difficulty': [8, 64, 16, 32], 'max_step': [3, 6, 9]}, 14),
    # Not monotone, never at max: it follows the list.
    ('discrete_below_max', 'fixed_discrete', 8, 100,
     {'difficulty': [8, 64, 16, 32], 'max_step': [3, 6, 9]}, 14),
    # max_step unsorted: DeepSpeed's first-match rule, and the last difficulty after the last entry.
    ('discrete_unsorted', 'fixed_discrete', 8, 32,
     {'difficulty': [8, 32, 16], 'max_step': [10, 4]}, 14),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, '..', 'tests', 'model', 'fixtures', 'curriculum_schedule.txt')
    lines = []
    for name, schedule, lo, hi, sc, steps in CASES:
        cfg = {'curriculum_type': 'seqlen', 'min_difficulty': lo, 'max_difficulty': hi,
               'schedule_type': schedule, 'schedule_config': sc}
        sched = CurriculumScheduler(cfg)
        lines.append('case %s' % name)
        lines.append('param schedule %s' % schedule)
        lines.append('param min_difficulty %d' % lo)
        lines.append('param max_difficulty %d' % hi)
        for key in sorted(sc):
            v = sc[key]
            lines.append('param %s %s' % (key, ','.join(map(str, v)) if isinstance(v, list) else v))
        lines.append('steps %d' % steps)
        # training.py: iteration 0 .. train_iters - 1, update_difficulty(args.iteration + 1).
        for iteration in range(steps):
            lines.append('step %d %d' % (iteration + 1, sched.update_difficulty(iteration + 1)))
        lines.append('end')
    with open(out_path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
