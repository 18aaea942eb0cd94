#!/usr/bin/env python3
"""Checks a `fabrica sim replay --events-out` log on its own, and the replay's numbers against it.

Usage: verify_replay.py [--idle-every S] EVENTS.jsonl [RESULT.json]

EVENTS.jsonl is the event log of one policy's run (scenarios/README.md, "The event log");
RESULT.json, when given, is that run's `--json` output, whose numbers are compared with the ones
recomputed here. Nothing of the simulator is imported: the log's first line gives the nodes and
the teams, every later line one arrival, placement, eviction or stop.

Checked, at every instant (after all the events of one time):
  - each node's cores and memory, each GPU's compute (1000 milli) and memory, each MIG slice held
    at most once, a MIG pod on a slice of its profile and a whole or fractional pod on a GPU with
    MIG off, the GPU model one a pod allows, a pod given as many GPUs as it asks;
  - trust isolation (DESIGN.md): a GPU shared by different teams only by MIG slices or, for
    fractional shares, by trusted teams of one trust domain; an untrusted team's GPU is its alone;
  - under `dedicated`, each team on its own nodes;
  - a run started no earlier than its workload's arrival, with all its pods or (an elastic job)
    at least its fewest; an evicted run stopped exactly one grace period after its eviction; a run
    that finished ran as long as its workload's duration, less the progress saved by checkpoints
    of earlier runs, at the pace of the pods it held (fewer pods, slower).
Recomputed over the arrival window: utilization (allocated milli-GPU·s / (capacity x window)),
useful utilization (less what evictions threw away), GPU-seconds lost, evictions, each team's
mean and p95 wait, and Jain's index of normalised shares (each team's time-averaged dominant
share of GPUs, cores and memory over its time-averaged weighted water-filled fair share of the
demand at each moment).
With --idle-every S (virtual seconds), it also looks, at most once every S seconds and only
right after an admission cycle (an instant where a run started), for pending work that the free
devices, cores and memory could have held then: each pending workload is tried, first fit, on
what nobody holds, under the same isolation rules, quotas ignored. Found room is reported, not a
violation: under `fabrica` quotas and the room held for work within its guarantee keep some of
it free on purpose; under `fifo` and `dedicated` (no quotas) it is work the admission cycle
passed over. A workload with a required topology or a node selector is not tried (the log does
not carry the topology of the fleet), and first fit may miss room a cleverer packing finds, so
the counts are a lower bound.
Prints 'OK ...' last and exits 0, or the violations and exits 1.
"""
import json
import math
import sys
from collections import defaultdict

EPS = 1e-6


def water_fill(demand, weight, total):
    out = [0.0] * len(demand)
    open_ = [i for i, d in enumerate(demand) if d > 0]
    left = total
    while open_ and left > 1e-12:
        wsum = sum(weight[i] for i in open_)
        level = left / wsum
        capped = [i for i in open_ if demand[i] - out[i] <= level * weight[i]]
        if not capped:
            for i in open_:
                out[i] += level * weight[i]
            break
        for i in capped:
            left -= demand[i] - out[i]
            out[i] = demand[i]
        open_ = [i for i in open_ if i not in capped]
    return out


def p95(values):
    v = sorted(values)
    return v[min(len(v) - 1, math.ceil(0.95 * len(v)) - 1)]


class Checker:
    def __init__(self, header):
        self.errors = []
        self.now = None
        self.policy = header['policy']
        self.w0, self.w1 = header['window']
        self.grace = header['grace_s']
        self.teams = header['teams']
        self.arrival_times = []
        self.nodes = {}
        for n in header['nodes']:
            if n['name'] in self.nodes:
                self.error(f"node {n['name']} listed twice")
            self.nodes[n['name']] = n
        self.cap_gpu = 1000.0 * sum(len(n['gpus']) for n in self.nodes.values())
        self.cap_cpu = max(1.0, float(sum(n['cpu'] for n in self.nodes.values())))
        self.cap_mem = max(1.0, float(sum(n['memory'] for n in self.nodes.values())))
        self.team_nodes = [set(t['nodes']) if t.get('nodes') is not None else None
                           for t in self.teams]
        # Under dedicated the teams' slices are disjoint parts of the fleet.
        owner = {}
        for i, names in enumerate(self.team_nodes):
            for name in names or ():
                if name not in self.nodes:
                    self.error(f"team {self.teams[i]['name']} owns {name}, not in the fleet")
                if name in owner:
                    self.error(f"{name} is owned by teams {self.teams[owner[name]]['name']} and "
                               f"{self.teams[i]['name']}")
                owner[name] = i
        nt = len(self.teams)
        self.weights = [t['weight'] for t in self.teams]
        # Live state.
        self.runs = {}  # run -> (workload, pods)
        self.wl = {}    # workload -> its record
        self.use = [[0.0, 0.0, 0.0] for _ in range(nt)]   # GPU milli, cpu, memory held
        self.pend = [[0.0, 0.0, 0.0] for _ in range(nt)]  # the same, of pending workloads
        self.alloc = 0.0
        self.touched = set()
        # Integrals over the window.
        self.clock = self.w0
        self.alloc_int = 0.0
        self.lost_int = 0.0
        self.lost_s = 0.0
        self.share_int = [0.0] * nt
        self.fair_int = [0.0] * nt
        self.evictions = 0
        self.now = None
        self.idle_every = None
        self.next_idle = -math.inf
        self.cycle_now = False  # a run started at this instant: an admission cycle ran
        self.idle_checks = 0
        self.idle_found = 0
        self.idle_examples = []
        self.idle_by_team = defaultdict(int)
        self.fit_last = {}  # workload -> the time of the look before, where it fit already
        self.idle_passed = set()  # workloads that fit at two looks in a row

    def error(self, msg):
        if len(self.errors) < 50:
            self.errors.append((self.now, msg))

    # ---- time ----
    def advance(self, t):
        if self.now is not None and t < self.now - EPS:
            self.error(f'time goes back from {self.now} to {t}')
        if self.now is not None and t > self.now:
            self.check_instant()
            if self.idle_every is not None and self.cycle_now and self.now >= self.next_idle:
                self.next_idle = self.now + self.idle_every
                self.check_idle()
            self.cycle_now = False
        a, b = max(self.clock, self.w0), min(t, self.w1)
        if b > a:
            dt = b - a
            self.alloc_int += self.alloc * dt
            demand = []
            for i, (u, p) in enumerate(zip(self.use, self.pend)):
                self.share_int[i] += max(u[0] / self.cap_gpu, u[1] / self.cap_cpu,
                                         u[2] / self.cap_mem) * dt
                demand.append(min(1.0, max((u[0] + p[0]) / self.cap_gpu,
                                           (u[1] + p[1]) / self.cap_cpu,
                                           (u[2] + p[2]) / self.cap_mem)))
            for i, f in enumerate(water_fill(demand, self.weights, 1.0)):
                self.fair_int[i] += f * dt
        self.clock = max(self.clock, t)
        self.now = t

    # ---- holdings ----
    def hold(self, team, pods, sign):
        for p in pods:
            n = self.nodes.get(p['node'])
            if n is None:
                self.error(f"unknown node {p['node']}")
                continue
            st = n.setdefault('_state', {'cpu': 0, 'mem': 0, 'gpu': defaultdict(list)})
            st['cpu'] += sign * p['cpu']
            st['mem'] += sign * p['memory']
            for d in p['devices']:
                held = st['gpu'][d[0]]
                entry = (team, p['kind'], d[1], d[2], d[3])
                if sign > 0:
                    held.append(entry)
                else:
                    held.remove(entry)
            self.use[team][0] += sign * p['milli']
            self.use[team][1] += sign * p['cpu']
            self.use[team][2] += sign * p['memory']
            self.alloc += sign * p['milli']
            self.touched.add(p['node'])

    def check_pods(self, w, team, pods):
        nodes = self.team_nodes[team]
        for p in pods:
            n = self.nodes.get(p['node'])
            if n is None:
                continue
            if nodes is not None and p['node'] not in nodes:
                self.error(f"{w}: team {self.teams[team]['name']} placed on {p['node']}, "
                           f"a node of another team under dedicated")
            devs = [d[0] for d in p['devices']]
            if len(devs) != p['gpus'] or len(set(devs)) != len(devs):
                self.error(f"{w}: a pod asking {p['gpus']} GPUs given devices {devs}")
            for d in p['devices']:
                if not 0 <= d[0] < len(n['gpus']):
                    self.error(f"{w}: device {d[0]} of {p['node']} does not exist")
                    continue
                g = n['gpus'][d[0]]
                if p['models'] and g['model'] not in p['models']:
                    self.error(f"{w}: model {g['model']} not in {p['models']}")
                # What the GPU is charged holds at least what the pod asks of it.
                if p['kind'] == 'whole' and (d[1] != 1000 or d[2] != max(g['memory'], 0)):
                    self.error(f"{w}: a whole GPU charged {d[1]} milli and {d[2]} MiB "
                               f"of {p['node']}/{d[0]}")
                if p['kind'] == 'fraction':
                    asked = p.get('gpu_memory', 0) or g['memory'] * p['milli'] // 1000
                    if d[1] < p['milli'] or d[1] <= 0 or (g['memory'] > 0 and d[2] < asked):
                        self.error(f"{w}: a share of {p['milli']} milli and {asked} MiB charged "
                                   f"{d[1]} milli and {d[2]} MiB of {p['node']}/{d[0]}")
                if p['kind'] == 'mig':
                    if not (0 <= d[3] < len(g['mig'])) or g['mig'][d[3]] != p['profile']:
                        self.error(f"{w}: MIG slice {d[3]} of {p['node']}/{d[0]} is not a "
                                   f"{p['profile']}")
                elif g['mig']:
                    self.error(f"{w}: {p['kind']} pod on {p['node']}/{d[0]}, a GPU with MIG on")

    def check_instant(self):
        for name in self.touched:
            n = self.nodes[name]
            st = n['_state']
            if st['cpu'] > n['cpu'] or st['mem'] > n['memory']:
                self.error(f"{name} over its cores or memory: {st['cpu']}/{n['cpu']} cores, "
                           f"{st['mem']}/{n['memory']} MiB")
            for d, held in st['gpu'].items():
                if not held:
                    continue
                g = n['gpus'][d]
                if g['mig']:
                    slices = [h[4] for h in held]
                    if len(set(slices)) != len(slices):
                        self.error(f"{name}/{d}: MIG slices held twice: {sorted(slices)}")
                else:
                    if sum(h[2] for h in held) > 1000:
                        self.error(f"{name}/{d}: {sum(h[2] for h in held)} milli held")
                    if g['memory'] > 0 and sum(h[3] for h in held) > g['memory']:
                        self.error(f"{name}/{d}: {sum(h[3] for h in held)} MiB of "
                                   f"{g['memory']} held")
                teams = {h[0] for h in held}
                if len(teams) > 1:
                    trust = [self.teams[t]['trust'] for t in teams]
                    domains = {self.teams[t]['trust_domain'] for t in teams}
                    names = sorted(self.teams[t]['name'] for t in teams)
                    if 'untrusted' in trust:
                        self.error(f"{name}/{d}: an untrusted team shares a GPU: {names}")
                    elif not g['mig'] and (set(trust) != {'trusted'} or len(domains) > 1):
                        self.error(f"{name}/{d}: fractional shares across trust: {names}")
        self.touched.clear()

    # ---- room left free while work waits (--idle-every) ----
    def share_key(self, team):
        t = self.teams[team]
        return ('domain', t['trust_domain']) if t['trust'] == 'trusted' else ('team', team)

    def device_takes(self, n, d, team, s, used):
        """Whether GPU d of node n (with `used`: what a trial placement added) takes one pod of
        set s of a workload of `team`, and the share it would be charged."""
        g = n['gpus'][d]
        held = n.get('_state', {'gpu': {}})['gpu'].get(d, []) + used.get((n['name'], d), [])
        kind = s['kind']
        if kind == 'whole':
            return (not held and not g['mig']), (team, 'whole', 1000, g['memory'], -1)
        if kind == 'fraction':
            if g['mig']:
                return False, None
            milli = s['milli']
            if milli == 0:
                if g['memory'] <= 0:
                    return False, None
                milli = min(999, max(1, s['gpu_memory'] * 1000 // g['memory']))
            memory = s['gpu_memory'] or g['memory'] * milli // 1000
            if any(h[1] != 'fraction' or self.share_key(h[0]) != self.share_key(team)
                   for h in held):
                return False, None
            if 1000 - sum(h[2] for h in held) < milli:
                return False, None
            if g['memory'] > 0 and g['memory'] - sum(h[3] for h in held) < memory:
                return False, None
            return True, (team, 'fraction', milli, memory, -1)
        if kind == 'mig':
            if not g['mig']:
                return False, None
            untrusted = self.teams[team]['trust'] == 'untrusted'
            for h in held:
                other = h[0] != team
                if other and (untrusted or self.teams[h[0]]['trust'] == 'untrusted'):
                    return False, None
            taken = {h[4] for h in held}
            for k, profile in enumerate(g['mig']):
                if profile == s['profile'] and k not in taken:
                    return True, (team, 'mig', 0, 0, k)
            return False, None
        return False, None

    def fits_free(self, rec):
        """First fit of every pod of a pending workload on what nobody holds."""
        used = defaultdict(list)   # (node, device) -> shares the trial adds
        node_used = defaultdict(lambda: [0, 0])
        names = self.team_nodes[rec['team']]
        for s in rec['sets']:
            for _ in range(s['count']):
                placed = False
                for n in self.nodes.values():
                    if names is not None and n['name'] not in names:
                        continue
                    if s['kind'] != 'none' and not n['gpus']:
                        continue
                    if s['models'] and n['gpus'] and n['gpus'][0]['model'] not in s['models']:
                        continue
                    st = n.get('_state', {'cpu': 0, 'mem': 0})
                    nu = node_used[n['name']]
                    if st['cpu'] + nu[0] + s['cpu'] > n['cpu'] or \
                            st['mem'] + nu[1] + s['memory'] > n['memory']:
                        continue
                    shares = []
                    for d in range(len(n['gpus'])):
                        if len(shares) == s['gpus']:
                            break
                        ok, share = self.device_takes(n, d, rec['team'], s, used)
                        if ok:
                            shares.append((d, share))
                    if len(shares) < s['gpus']:
                        continue
                    for d, share in shares:
                        used[(n['name'], d)].append(share)
                    nu[0] += s['cpu']
                    nu[1] += s['memory']
                    placed = True
                    break
                if not placed:
                    return False
        return True

    def check_idle(self):
        """Pending workloads that fit what nobody holds at this look; one that fit at the look
        before too was passed over by the admission cycles between (at least two: one runs at
        each look)."""
        self.idle_checks += 1
        verdict = {}  # shape -> fits (workloads of one shape and team fare alike)
        fit_now = {}
        for w, rec in self.wl.items():
            if rec['pending_since'] is None or rec['infeasible'] or rec['state'] != 'pending':
                continue
            if rec.get('topology_required') or any(s.get('selects_nodes') for s in rec['sets']):
                continue
            shape = (rec['team'], json.dumps(rec['sets'], sort_keys=True))
            if shape not in verdict:
                verdict[shape] = self.fits_free(rec)
            if not verdict[shape]:
                continue
            fit_now[w] = self.now
            if w in self.fit_last and w not in self.idle_passed:
                self.idle_passed.add(w)
                self.idle_by_team[self.teams[rec['team']]['name']] += 1
                if len(self.idle_examples) < 5:
                    self.idle_examples.append(
                        f"{w} ({self.teams[rec['team']]['name']}, pending since "
                        f"{rec['pending_since']}) fit what nobody held at t={self.fit_last[w]} "
                        f"and still at t={self.now}")
        if fit_now:
            self.idle_found += 1
        self.fit_last = fit_now

    # ---- a workload's runs ----
    def progress_over(self, rec, a, b, gpu):
        total = 0.0
        spells = rec['spells']
        for k, (start, rate, milli) in enumerate(spells):
            end = spells[k + 1][0] if k + 1 < len(spells) else math.inf
            span = min(b, end) - max(a, start)
            if span > 0:
                total += span * (milli if gpu else rate)
        return total

    def set_pending(self, rec, on):
        sign = 1 if on else -1
        p = self.pend[rec['team']]
        p[0] += sign * rec['milli']
        p[1] += sign * rec['cpu']
        p[2] += sign * rec['memory']
        if on:
            rec['pending_since'] = self.now
        else:
            rec['wait'] += self.now - rec['pending_since']
            rec['pending_since'] = None

    def event(self, e):
        t = e['t']
        self.advance(t)
        ev = e['ev']
        if ev == 'arrive':
            rec = dict(team=e['team'], milli=e['milli'], cpu=e['cpu'], memory=e['memory'],
                       pods=e['pods'], least=e['least_pods'], duration=e['duration_s'],
                       checkpoint=e['checkpoint_s'], arrival=t, state='pending', wait=0.0,
                       pending_since=t, progress=0.0, main=None, spells=[], start=None,
                       infeasible=e['infeasible'], evicted_at=None,
                       sets=e.get('sets', []), topology_required=e.get('topology_required'))
            self.arrival_times.append(t)
            if e['w'] in self.wl:
                self.error(f"{e['w']} arrives twice")
            self.wl[e['w']] = rec
            if not rec['infeasible']:
                self.set_pending(rec, True)
            return
        if ev == 'end':
            self.end = t
            return
        w = e['w']
        rec = self.wl.get(w)
        if rec is None:
            self.error(f'{ev} of {w}, which never arrived')
            return
        run = e['run']
        if rec['main'] is None and ev == 'place':
            rec['main'] = run
        fragment = run != rec['main']
        if ev == 'place':
            pods = e['pods']
            if e['team'] != rec['team']:
                self.error(f"{w}: placed as team {e['team']}'s, arrived as {rec['team']}'s")
            self.check_pods(w, rec['team'], pods)
            old = self.runs.get(run)
            if old is not None:
                self.hold(rec['team'], old[1], -1)
            self.runs[run] = (w, pods)
            self.hold(rec['team'], pods, +1)
            if fragment:
                return
            self.cycle_now = True
            rate = len(pods) / rec['pods']
            milli = sum(p['milli'] for p in pods)
            if len(pods) < rec['least'] or len(pods) > rec['pods']:
                self.error(f"{w}: runs {len(pods)} pods; asks {rec['pods']}, "
                           f"at least {rec['least']}")
            if rec['state'] == 'pending':
                if rec['infeasible']:
                    self.error(f'{w}: started though its arrival called it infeasible')
                if t < rec['arrival'] - EPS:
                    self.error(f'{w}: started at {t}, before its arrival at {rec["arrival"]}')
                self.set_pending(rec, False)
                rec['state'] = 'running'
                rec['start'] = t
                rec['spells'] = [(t, rate, milli)]
            elif rec['state'] == 'running':
                rec['spells'].append((t, rate, milli))
            else:
                self.error(f"{w}: placed while {rec['state']}")
        elif ev == 'evict':
            if e.get('by') == w:
                self.error(f'{w}: evicted for itself')
            if fragment:
                self.runs[run] = self.runs[run] + (t,)
                return
            if rec['state'] != 'running':
                self.error(f"{w}: evicted while {rec['state']}")
            rec['state'] = 'evicting'
            rec['evicted_at'] = t
            self.evictions += 1
        elif ev == 'free':
            why = e['why']
            held = self.runs.pop(run, None)
            if held is None:
                self.error(f'{w}: frees run {run}, which holds nothing')
                return
            self.hold(rec['team'], held[1], -1)
            if fragment:
                if why != 'shrunk' or len(held) < 3 or abs(t - held[2] - self.grace) > EPS:
                    self.error(f'{w}: pods taken by a shrink stopped at {t} ({why})')
                return
            if why == 'finish':
                # (A victim whose work ends within its grace period finishes.)
                if rec['state'] not in ('running', 'evicting'):
                    self.error(f"{w}: finished while {rec['state']}")
                done = rec['progress'] + self.progress_over(rec, rec['start'], t, False)
                if abs(done - rec['duration']) > 1e-6 * max(1.0, rec['duration']):
                    self.error(f"{w}: finished after {done:.6f} s of work; it needs "
                               f"{rec['duration']:.6f} s")
                rec['state'] = 'done'
            elif why == 'evicted':
                if rec['state'] != 'evicting' or abs(t - rec['evicted_at'] - self.grace) > EPS:
                    self.error(f'{w}: stopped at {t}, evicted at {rec["evicted_at"]}')
                ran = t - rec['start']
                every = rec['checkpoint']
                saved = min(max(ran - math.fmod(ran, every), 0.0), ran) if every > 0 else 0.0
                frm = rec['start'] + saved
                rec['progress'] += self.progress_over(rec, rec['start'], frm, False)
                self.lost_s += self.progress_over(rec, frm, t, True) / 1000.0
                self.lost_int += self.progress_over(rec, max(frm, self.w0), min(t, self.w1), True)
                rec['state'] = 'pending'
                self.set_pending(rec, True)
            elif why == 'released':
                rec['state'] = 'pending'
                self.set_pending(rec, True)
            else:
                self.error(f'{w}: stopped for an unknown reason {why}')
        else:
            self.error(f'unknown event {ev}')

    def finish(self):
        self.check_instant()
        end = getattr(self, 'end', None)
        if end is None:
            self.error('the log has no end line (cut short?)')
            end = self.now
        if self.runs:
            self.error(f'{len(self.runs)} runs still hold devices at the end')
        span = self.w1 - self.w0
        out = {
            'utilization_pct': 100.0 * self.alloc_int / (self.cap_gpu * span),
            'useful_utilization_pct': 100.0 * (self.alloc_int - self.lost_int) / (self.cap_gpu * span),
            'preemptions': self.evictions,
            'gpu_seconds_lost': self.lost_s,
            'teams': [],
        }
        sx = sxx = nx = 0
        unfinished = 0
        for i, t in enumerate(self.teams):
            waits = []
            count = 0
            for rec in self.wl.values():
                if rec['team'] != i:
                    continue
                count += 1
                if rec['infeasible']:
                    continue  # (no scheduler could start it: no wait, as no share)
                wait = rec['wait']
                if rec['pending_since'] is not None:
                    wait += end - rec['pending_since']
                if rec['state'] != 'done':
                    unfinished += 1
                waits.append(wait)
            share = self.share_int[i] / span
            fair = self.fair_int[i] / span
            if fair > 0:
                x = share / fair
                sx += x
                sxx += x * x
                nx += 1
            out['teams'].append({'name': t['name'], 'workloads': count,
                                 'wait_mean_s': sum(waits) / len(waits) if waits else 0.0,
                                 'wait_p95_s': p95(waits) if waits else 0.0})
        out['jain_index'] = sx * sx / (nx * sxx) if nx and sxx > 0 else 1.0
        out['unfinished'] = unfinished
        return out


def compare(mine, theirs, errors):
    def close(key, a, b, tol):
        if abs(a - b) > tol:
            errors.append((None, f'{key}: the replay says {b}, the log gives {a}'))
    close('utilization_pct', mine['utilization_pct'], theirs['utilization_pct'], 1e-6)
    close('useful_utilization_pct', mine['useful_utilization_pct'],
          theirs['useful_utilization_pct'], 1e-6)
    close('jain_index', mine['jain_index'], theirs['jain_index'], 1e-6)
    close('preemptions', mine['preemptions'], theirs['preemptions'], 0)
    close('gpu_seconds_lost', mine['gpu_seconds_lost'], theirs['gpu_seconds_lost'],
          1e-6 * max(1.0, theirs['gpu_seconds_lost']))
    by_name = {t['name']: t for t in theirs['teams']}
    for t in mine['teams']:
        o = by_name.get(t['name'])
        if o is None:
            errors.append((None, f"team {t['name']} missing from the replay's JSON"))
            continue
        close(f"{t['name']}.workloads", t['workloads'], o['workloads'], 0)
        close(f"{t['name']}.wait_mean_s", t['wait_mean_s'], o['wait_mean_s'],
              1e-6 * max(1.0, o['wait_mean_s']))
        close(f"{t['name']}.wait_p95_s", t['wait_p95_s'], o['wait_p95_s'],
              1e-6 * max(1.0, o['wait_p95_s']))


def main(argv):
    idle_every = None
    if len(argv) >= 3 and argv[1] == '--idle-every':
        idle_every = float(argv[2])
        argv = argv[:1] + argv[3:]
    if len(argv) not in (2, 3):
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        first = f.readline()
        if not first.strip():
            print(f'{argv[1]}: empty', file=sys.stderr)
            return 1
        header = json.loads(first)
        if header.get('ev') != 'scenario':
            print(f'{argv[1]}: the first line is not the scenario', file=sys.stderr)
            return 1
        c = Checker(header)
        c.idle_every = idle_every
        lines = 1
        for line in f:
            lines += 1
            c.event(json.loads(line))
    # The window is the replay's (first to last arrival): rechecked from the arrivals.
    arrivals = [t for t in c.arrival_times]
    if arrivals:
        first_t, last_t = min(arrivals), max(arrivals)
        if abs(first_t - c.w0) > 1e-6 or abs(max(first_t + 1, last_t) - c.w1) > 1e-6:
            c.error(f'the window [{c.w0}, {c.w1}] is not first to last arrival '
                    f'[{first_t}, {max(first_t + 1, last_t)}]')
    mine = c.finish()
    errors = c.errors
    if len(argv) == 3:
        with open(argv[2]) as f:
            compare(mine, json.load(f), errors)
    if idle_every is not None:
        print(f'idle room: {c.idle_found} of {c.idle_checks} looks (one right after an admission '
              f'cycle, at most every {idle_every:g} s) found pending work that fit what nobody '
              f'held; {len(c.idle_passed)} workloads fit at two looks in a row (passed over), '
              f'by team: {dict(c.idle_by_team)}')
        for x in c.idle_examples:
            print(f'  {x}')
    for t, msg in errors:
        print(f'VIOLATION{"" if t is None else f" at t={t}"}: {msg}')
    teams = ' '.join(f"{t['name']}:{t['wait_mean_s']:.1f}/{t['wait_p95_s']:.1f}"
                     for t in mine['teams'])
    summary = (f"events={lines} utilization_pct={mine['utilization_pct']:.4f} "
               f"useful_utilization_pct={mine['useful_utilization_pct']:.4f} "
               f"jain_index={mine['jain_index']:.4f} preemptions={mine['preemptions']} "
               f"gpu_seconds_lost={mine['gpu_seconds_lost']:.1f} unfinished={mine['unfinished']} "
               f"waits(mean/p95)={teams}")
    if errors:
        print(f'FAILED {len(errors)} violation(s); {summary}')
        return 1
    print(f"OK {summary}{' (matches the replay JSON)' if len(argv) == 3 else ''}")
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
