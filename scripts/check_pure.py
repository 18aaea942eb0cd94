#!/usr/bin/env python3
"""The pure core (core/, sched/) must not read clocks, files, sockets or the environment, nor
start threads: the same code runs in the server, the simulator and the tests. Fails naming the
file and line of any violation."""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src')
PURE = ['core', 'sched', 'meter', 'health']
FORBIDDEN = re.compile(r'#include <(thread|fstream|filesystem|sys/socket\.h|unistd\.h)>|'
                       r'::now\(\)|\bgetenv\b|\bfopen\b|std::random_device')
bad = 0
for part in PURE:
    folder = os.path.join(ROOT, part)
    if not os.path.isdir(folder):
        continue
    for name in sorted(os.listdir(folder)):
        if not name.endswith(('.h', '.cc')) or name.endswith('_test.cc'):
            continue
        for i, line in enumerate(open(os.path.join(folder, name)), 1):
            if FORBIDDEN.search(line):
                print(f'src/{part}/{name}:{i}: not allowed in the pure core: {line.strip()}')
                bad += 1
print('pure-core check:', 'OK' if not bad else f'{bad} violation(s)')
sys.exit(1 if bad else 0)
