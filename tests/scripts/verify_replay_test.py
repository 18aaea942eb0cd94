#!/usr/bin/env python3
"""`fabrica sim replay --events-out` under each policy, checked by scripts/verify_replay.py, and
the checker shown to catch what it is for: each tampered copy of a good log must fail, naming
the fault.

Usage: verify_replay_test.py FABRICA_BIN SOURCE_DIR
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    print(('ok    ' if cond else 'FAIL  ') + what)
    if not cond:
        failures.append(what)


def verify(verifier, log, result=None):
    args = [sys.executable, verifier, log] + ([result] if result else [])
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def write(path, events):
    with open(path, 'w') as f:
        for e in events:
            f.write(json.dumps(e) + '\n')


def main(fabrica, source):
    verifier = os.path.join(source, 'scripts', 'verify_replay.py')
    scenario = os.path.join(source, 'tests', 'data', 'replay', 'mixed.yaml')
    tmp = tempfile.mkdtemp(prefix='verify-replay-')
    logs = {}
    for policy in ('dedicated', 'fifo', 'fabrica'):
        log = os.path.join(tmp, policy + '.jsonl')
        result = os.path.join(tmp, policy + '.json')
        with open(result, 'w') as out:
            p = subprocess.run([fabrica, 'sim', 'replay', '--scenario', scenario, '--policy',
                                policy, '--json', '--events-out', log], stdout=out,
                               stderr=subprocess.PIPE, text=True)
        check(p.returncode == 0, f'{policy}: the replay runs ({p.stderr.strip()[:200]})')
        rc, text = verify(verifier, log, result)
        check(rc == 0 and 'matches the replay JSON' in text,
              f'{policy}: its log passes and its numbers match: {text.strip()[-300:]}')
        # The verifier catches each tampered number and event it recomputes (its own cases).
        p = subprocess.run([sys.executable, verifier, '--self-test', log, result],
                           capture_output=True, text=True)
        check(p.returncode == 0, f'{policy}: --self-test: {p.stdout.strip()[-300:]}')
        logs[policy] = read(log)

    # Two policies at once cannot share one log.
    p = subprocess.run([fabrica, 'sim', 'replay', '--scenario', scenario, '--events-out',
                        os.path.join(tmp, 'x.jsonl')], capture_output=True, text=True)
    check(p.returncode != 0 and '--events-out needs --policy' in p.stderr,
          f'--events-out with every policy is refused: {p.stderr.strip()}')

    good = logs['fabrica']
    header = good[0]
    kinds = {(e['ev'], e.get('why')) for e in good}
    for k in [('arrive', None), ('place', None), ('evict', None), ('evict', 'shrink'),
              ('free', 'finish'), ('free', 'evicted'), ('free', 'shrunk'), ('end', None)]:
        check(k in kinds, f'the fabrica log has {k[0]} events' + (f' ({k[1]})' if k[1] else ''))
    teams = [t['name'] for t in header['teams']]
    external = teams.index('external')
    research = teams.index('research')
    nodes = {n['name']: n for n in header['nodes']}

    def tampered(name, events, expect, result=None):
        path = os.path.join(tmp, name + '.jsonl')
        write(path, events)
        rc, text = verify(verifier, path, result)
        check(rc == 1 and expect in text and 'Traceback' not in text,
              f'{name}: caught ({expect!r}): {text.strip()[:300]}')

    # A pod given more cores than its node has.
    ev = copy.deepcopy(good)
    place = next(e for e in ev if e['ev'] == 'place')
    place['pods'][0]['cpu'] = nodes[place['pods'][0]['node']]['cpu'] + 1
    tampered('overcommitted-cores', ev, 'over its cores or memory')

    # A whole GPU handed to a second pod while its first holder runs: the first whole-GPU
    # placement's device given again to the next whole-GPU pod placed while it still runs.
    ev = copy.deepcopy(good)
    holding = {}
    done = False
    for e in ev:
        if done:
            break
        if e['ev'] == 'free':
            holding.pop(e['run'], None)
        if e['ev'] != 'place':
            continue
        for p in e['pods']:
            if p['kind'] != 'whole' or p['gpus'] != 1:
                continue
            for run, (node, dev) in holding.items():
                if run != e['run']:
                    p['node'] = node
                    p['devices'][0][0] = dev
                    p['devices'][0][2] = nodes[node]['gpus'][dev]['memory']
                    done = True
                    break
            if done:
                break
            holding[e['run']] = (p['node'], p['devices'][0][0])
    check(done, 'found two whole-GPU runs at once to collide')
    tampered('gpu-given-twice', ev, 'milli held')

    # A research workload (standard trust) made the untrusted team's: its fractional pods then
    # share a GPU with another team's.
    ev = copy.deepcopy(good)
    shared = None
    held = {}
    for e in ev:
        if e['ev'] == 'free':
            held.pop(e['run'], None)
        if e['ev'] != 'place':
            continue
        held[e['run']] = e
        if e['team'] != research or e['pods'][0]['kind'] != 'fraction':
            continue
        key = (e['pods'][0]['node'], e['pods'][0]['devices'][0][0])
        for other in held.values():
            if other is not e and other['pods'] and other['team'] == research and \
                    other['pods'][0]['kind'] == 'fraction' and \
                    (other['pods'][0]['node'], other['pods'][0]['devices'][0][0]) == key:
                shared = e['w']
                break
        if shared:
            break
    check(shared is not None, 'found research fractions sharing a GPU')
    for e in ev:
        if e['ev'] in ('arrive', 'place') and e['w'] == shared:
            e['team'] = external
    tampered('untrusted-shares-a-gpu', ev, 'an untrusted team shares a GPU')

    # A workload's duration lengthened: its run ended too soon.
    ev = copy.deepcopy(good)
    finished = next(e['w'] for e in ev if e['ev'] == 'free' and e['why'] == 'finish')
    for e in ev:
        if e['ev'] == 'arrive' and e['w'] == finished:
            e['duration_s'] += 10
    tampered('run-cut-short', ev, 'finished after')

    # An eviction left out: the victim stopped while it was not being evicted. (One whose victim
    # stopped for it: a victim that finishes in its grace period leaves no trace but the count.)
    ev = copy.deepcopy(good)
    stopped = {e['run'] for e in ev if e['ev'] == 'free' and e['why'] == 'evicted'}
    i = next(k for k, e in enumerate(ev)
             if e['ev'] == 'evict' and e.get('why') is None and e['run'] in stopped)
    del ev[i]
    tampered('eviction-unlogged', ev, 'evicted at')

    # Two whole-GPU pods charged nothing, on one GPU: a GPU's charge is checked against what its
    # pod asks, not only summed.
    ev = copy.deepcopy(good)
    place = next(e for e in ev if e['ev'] == 'place' and e['pods'][0]['kind'] == 'whole')
    for d in place['pods'][0]['devices']:
        d[1] = 0
    tampered('whole-gpu-charged-nothing', ev, 'a whole GPU charged 0 milli')

    # A fractional share charged less than it asks.
    ev = copy.deepcopy(good)
    place = next(e for e in ev if e['ev'] == 'place' and e['pods'][0]['kind'] == 'fraction')
    place['pods'][0]['devices'][0][2] = 1
    tampered('share-charged-less', ev, 'charged')

    # A MIG slice handed out twice.
    ev = copy.deepcopy(good)
    live = {}
    twice = None
    for e in ev:
        if e['ev'] == 'free':
            live.pop(e['run'], None)
        if e['ev'] != 'place' or e['pods'][0]['kind'] != 'mig':
            continue
        p = e['pods'][0]
        for run, q in live.items():
            if q['node'] == p['node'] and q['devices'][0][0] == p['devices'][0][0] and \
                    q['profile'] == p['profile']:
                p['devices'][0][3] = q['devices'][0][3]
                twice = e['w']
                break
        if twice:
            break
        live[e['run']] = p
    check(twice is not None, 'found two MIG slices of one profile on one GPU at once')
    tampered('mig-slice-twice', ev, 'MIG slices held twice')

    # Under dedicated, a node owned by two teams in the header.
    ev = copy.deepcopy(logs['dedicated'])
    ev[0]['teams'][1]['nodes'].append(ev[0]['teams'][0]['nodes'][0])
    tampered('dedicated-node-owned-twice', ev, 'is owned by teams')

    # A place line naming another team than the workload's.
    ev = copy.deepcopy(good)
    place = next(e for e in ev if e['ev'] == 'place')
    place['team'] = (place['team'] + 1) % len(teams)
    tampered('place-of-another-team', ev, 'placed as team')

    # A window that is not first to last arrival (the measures' own, taken from the header).
    ev = copy.deepcopy(good)
    ev[0]['window'] = [ev[0]['window'][0], ev[0]['window'][1] * 2]
    tampered('window-not-the-arrivals', ev, 'is not first to last arrival')

    # The log cut short.
    tampered('no-end', [e for e in good if e['ev'] != 'end'], 'no end line')

    # Under dedicated, a team on another team's nodes: two teams' node lists swapped.
    ev = copy.deepcopy(logs['dedicated'])
    t = ev[0]['teams']
    t[0]['nodes'], t[1]['nodes'] = t[1]['nodes'], t[0]['nodes']
    tampered('dedicated-nodes-swapped', ev, 'a node of another team under dedicated')

    # Room left idle while work that fits waits (--idle-every): a fifo run's log with one
    # workload's start and stop taken out leaves it waiting beside room it fits; the look finds
    # more work passed over than in the log as run.
    def passed_over(path):
        p = subprocess.run([sys.executable, verifier, '--idle-every', '1', path],
                           capture_output=True, text=True)
        for line in p.stdout.splitlines():
            if line.startswith('idle room:'):
                return int(line.split('; ')[1].split()[0]), line
        return None, p.stdout + p.stderr

    fifo_log = os.path.join(tmp, 'fifo.jsonl')
    before, line = passed_over(fifo_log)
    check(before is not None, f'the idle look reports: {line}')
    ev = copy.deepcopy(logs['fifo'])
    place = next(e for e in ev if e['ev'] == 'place' and len(e['pods']) == 1 and
                 e['pods'][0]['kind'] == 'whole' and e['t'] > ev[0]['window'][0] + 600)
    ev = [e for e in ev if not (e.get('run') == place['run'] and e['ev'] in ('place', 'free'))]
    path = os.path.join(tmp, 'start-dropped.jsonl')
    write(path, ev)
    after, line = passed_over(path)
    check(after is not None and before is not None and after > before,
          f"{place['w']}, never started beside room it fits, is found passed over: "
          f'{before} -> {after} workloads')

    # The replay's JSON claiming more utilization than its log shows.
    path = os.path.join(tmp, 'fabrica.json')
    with open(path) as f:
        result = json.load(f)
    result['utilization_pct'] += 0.01
    bad = os.path.join(tmp, 'inflated.json')
    with open(bad, 'w') as f:
        json.dump(result, f)
    tampered('utilization-inflated', good, 'utilization_pct: the replay says', bad)

    print(f'{len(failures)} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], sys.argv[2]))
