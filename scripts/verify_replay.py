#!/usr/bin/env python3
"""Checks a `fabrica sim replay --events-out` log on its own, and the replay's numbers against it
and against the scenario rebuilt here from its own files.

Usage: verify_replay.py [--idle-every S] [--scenario YAML | --no-scenario] [--trace-dir DIR]
                        [--load L] EVENTS.jsonl [RESULT.json]
       verify_replay.py --self-test EVENTS.jsonl RESULT.json

EVENTS.jsonl is the event log of one policy's run (scenarios/README.md, "The event log");
RESULT.json, when given, is that run's `--json` output, whose numbers are compared with the ones
recomputed here (to 1e-6, relative where the number is large). Nothing of the simulator is
imported, and no third-party module: Python's standard library only.

The scenario. The log's first line names the scenario; the script finds its file (the
repository's scenarios/ and tests/data/replay/, or the log's directory, by its `name:`), or
takes --scenario, and rebuilds what the replay built from it, so that the log is not trusted
for it: the fleet (a synthetic fleet as src/sim/synthetic.cc makes it; an openb trace's node
CSV, from the file's trace.dir or --trace-dir), every workload (a synthetic team's draws, with
the same mt19937_64 and the same draws, or the openb pod CSV with its team hash, gap
shortening, compression and overlaid copies), each team's guarantee per pool (Calibrate: its
share of guaranteeShare of the fleet by demand inside the configured window, MIG GPUs apart)
and the fairness weights (the team's `weight`, else its guarantee's share of all guarantees).
The load is --load, else RESULT.json's `load` (the run's setting, not a measure), else the
file's. YAML is read by a small parser of the subset scenario files use (block maps and lists,
flow maps and lists, scalars, comments; no PyYAML: it is not always installed); --self-test
compares it with PyYAML where that is present. Each `arrive` line is checked against the rebuilt
workload (team, arrival, duration, checkpoint interval, every pod set, the totals) and each
`place` line's pods against the workload's pod sets (and the compute each pod holds against its
request, or for a share of GPU memory alone, its memory's share of the GPU it holds), and the
header's nodes, trust and weights against the rebuilt ones. Where they agree, the rebuilt
sizes, flags and weights are the ones used; where one disagrees it is a violation, and that
workload is followed as the log gives it (the run fails either way; the log's own consistency
checks then still name what else is wrong). Every workload of the scenario must arrive.
Not rebuilt (said in the output as NOT RECOMPUTED, the log's value then used): an explicit
queue tree (`admission.queues`: guarantees and weights), a required topology's domain check,
and a multi-pod workload whose pods each fit a node but that a greedy packing of them together
on the empty fleet cannot place (the replay's own packing may): those workloads' `infeasible`
flags are the log's. Under dedicated, the split of the nodes among the teams is rebuilt too
(RunReplay's) and checked against the header's; a team's guarantee there is what its nodes
hold.
With --no-scenario (or no file found) the sizes, the infeasible flags and the weights are the
log's, and the guarantee measures are not checked; the output says so.

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
    of earlier runs, at the pace of the pods it held (fewer pods, slower);
  - (with the scenario) a workload's `infeasible` flag: whether some node of the empty fleet
    takes each of its pods (cores, memory, GPUs of an allowed model with MIG off, GPU memory, a
    slice of its MIG profile), the fleet holds as many pods of each set (node by node, that set
    alone), and a first-fit packing takes them all; a workload called infeasible, or
    policy-blocked, that is placed anyway is a violation too.
Recomputed over the arrival window: utilization (allocated milli-GPU·s / (capacity x window)),
useful utilization (less what evictions threw away), GPU-seconds lost (in all and per team),
evictions (in all, per victim team and per preemptor's team, workloads evicted, evicted 3+
times, the most), each team's workloads, infeasible, never-admitted and policy-blocked counts,
mean and p95 wait (in all and by size), its time-averaged dominant share (the largest of its
shares of the fleet's GPUs, cores and memory held), its time-averaged fair share (at each
moment the weighted max-min water-filled split of the fleet among the teams with demand then,
each capped by its demand: what it holds plus what it has pending, as a dominant share), Jain's
index of share / fair share, the time it held less than its guarantee in a pool while a pending
workload of it would fit in the difference (below_guarantee_pending_s) or while any work of
it was pending (below_guarantee_any_pending_s), and its guarantee in GPUs; and the window,
the workload count, the offered loads and (openb) the trace's copies, compression and pods left
out. Policy-blocked work (never admissible under this policy though the fleet could run it:
under dedicated, work no empty node of the team's slice takes; under fabrica, work past its
team's guarantee plus borrowingLimit) waits to the end, in the waits, shares and the
any-pending time, not in the pending-that-fits time.
The guarantee bound (a team below its guarantee with pending work that fits waits no longer
than interval + grace + the longest remaining minimum runtime of its victims, but for a
disruption budget). Recomputed exactly: guarantee_episodes (spans in which a team held less
than its guarantee in a pool while a pending workload of it would fit in the difference, each
against interval + grace + the remaining minimum runtime, when the span began, of the victims
evicted for its work: the victims' minimum runtime from the scenario, capped by
reclaimMinRuntime against other teams). Bounded from the log: guarantee_bound (each pending
workload of a pool, in its queue's order -- priority, arrival, workload -- counted as fitting
when it fits in what those before it that fit left of the room below the guarantee) and
guarantee_bound_alone (each against the room by itself): each wait from when it fits, refitted
as the replay does after an instant's stops and arrivals and again after its admission cycle.
The log gives every wait that ends in a start or at the end (always checked), and every wait
lost to the room shrinking that ran past interval + grace + its evicted victims' remaining
minimum runtime. The replay may extend a bound further, by victims its search waited for that
were never evicted (not in the log), so its `checked` must lie between the first count and the
whole, its exceptions and worst_excess_s be at most the log's, and each exception it lists be a
wait the log shows, as long, against a bound at least the log's. Not recomputed: each
exception's kind and cause (whether a disruption budget held its evictions back is the
admitter's state, not in the log).
With --idle-every S (virtual seconds), it also looks, at most once every S seconds and only
right after an admission cycle (an instant where a run started), for pending work that the free
devices, cores and memory could have held then: each pending workload is tried, first fit, on
what nobody holds, under the same isolation rules, quotas ignored. Found room is reported, not a
violation: under `fabrica` quotas and the room held for work within its guarantee keep some of
it free on purpose; under `fifo` and `dedicated` (no quotas) it is work the admission cycle
passed over. A workload with a required topology or a node selector is not tried (the log does
not carry the topology of the fleet), and first fit may miss room a cleverer packing finds, so
the counts are a lower bound.
Not compared (nothing in the log or the scenario shows them): cycles and their wall-clock
times, workloads_reserved and workloads_backfilled (the admitter's reservations), the reasons'
texts (infeasible_reason, policy_blocked_reason, no_slice) and exceptions_by_kind.
--self-test EVENTS RESULT: checks the YAML subset against PyYAML (where installed) and
mt19937_64 against the standard's check value, that the good log and result pass, then that
tampered copies fail naming the number: in the result a team's below_guarantee_pending_s
(longer, shorter), below_guarantee_any_pending_s, jain_index, avg_share, avg_fair_share,
guarantee_gpus, infeasible, offered_load, guarantee_episodes, guarantee_bound(_alone) checked
and exceptions; in the log the end line dropped, a run's finish dropped, a fitting workload
marked infeasible, an arrival's size changed, a weight and a node's cores changed, a start
delayed by a minute. Exits 0 when every case holds.
Prints 'OK ...' last and exits 0, or the violations and exits 1.
"""
import bisect
import copy
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict

EPS = 1e-6
# ---------------------------------------------------------------------------------------------
# The scenario, rebuilt here from its YAML and (openb) its trace CSVs, without the simulator.
# ---------------------------------------------------------------------------------------------

def _strip_comment(line):
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in '"\'':
            quote = c
        elif c == '#' and (i == 0 or line[i - 1] in ' \t'):
            return line[:i]
    return line


def _scalar(s):
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in '"\'':
        return s[1:-1]
    return s


def _split_flow(s):
    """Splits the inside of a flow collection at its top-level commas."""
    out, depth, cur, quote = [], 0, '', None
    for c in s:
        if quote:
            cur += c
            if c == quote:
                quote = None
            continue
        if c in '"\'':
            quote = c
        elif c in '[{':
            depth += 1
        elif c in ']}':
            depth -= 1
        if c == ',' and depth == 0:
            out.append(cur)
            cur = ''
        else:
            cur += c
    if cur.strip():
        out.append(cur)
    return out


def _flow(s):
    s = s.strip()
    if s.startswith('{') and s.endswith('}'):
        out = {}
        for part in _split_flow(s[1:-1]):
            k, _, v = part.partition(':')
            out[_scalar(k)] = _flow(v)
        return out
    if s.startswith('[') and s.endswith(']'):
        return [_flow(p) for p in _split_flow(s[1:-1])]
    return _scalar(s)


def mini_yaml(text):
    """The YAML subset scenario files use: block maps and sequences, flow maps and lists, plain
    or quoted scalars, comments. Every scalar stays a string (converted where it is read, as
    the C++ reader does); no anchors, tags or multi-line scalars."""
    lines = []
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if line.strip() in ('', '---'):
            continue
        lines.append((len(line) - len(line.lstrip(' ')), line.strip()))

    def block(i, indent):
        if i >= len(lines) or lines[i][0] < indent:
            return None, i
        indent = lines[i][0]
        if lines[i][1].startswith('- ') or lines[i][1] == '-':
            seq = []
            while i < len(lines) and lines[i][0] == indent and \
                    (lines[i][1].startswith('- ') or lines[i][1] == '-'):
                rest = lines[i][1][1:].strip()
                if not rest:
                    v, i = block(i + 1, indent + 1)
                    seq.append(v)
                    continue
                if _is_key(rest):
                    lines[i] = (indent + 2, rest)  # the item's first key, as a line of its own
                    v, i = block(i, indent + 2)
                    seq.append(v)
                else:
                    seq.append(_flow(rest))
                    i += 1
            return seq, i
        out = {}
        while i < len(lines) and lines[i][0] == indent:
            content = lines[i][1]
            if not _is_key(content):
                raise ValueError(f'line {content!r}: expected "key: value"')
            k, _, v = content.partition(':')
            k, v = _scalar(k), v.strip()
            i += 1
            if v:
                out[k] = _flow(v)
            elif i < len(lines) and (lines[i][0] > indent or
                                     (lines[i][0] == indent and lines[i][1].startswith('-'))):
                out[k], i = block(i, lines[i][0])
            else:
                out[k] = None
        return out, i

    value, i = block(0, 0)
    if i != len(lines):
        raise ValueError(f'unparsed from {lines[i][1]!r}')
    return value


def _is_key(s):
    if s[:1] in '{["\'':
        return False
    k, sep, v = s.partition(':')
    return bool(sep) and (v == '' or v[:1] == ' ')


def _num(s, default=None):
    if s is None:
        return default
    return float(s)


def _decimal(text, scale):
    """A non-negative decimal scaled by 10^scale, exactly (ParseScaledDecimal)."""
    whole, _, frac = str(text).partition('.')
    if len(frac) > scale:
        raise ValueError(f'{text}: too many decimals')
    return int(whole or '0') * 10 ** scale + int((frac + '0' * scale)[:scale] or '0')


def parse_milli(text):  # GPU or CPU: "2", "0.25", "250m"
    text = str(text)
    return int(text[:-1]) if text.endswith('m') else _decimal(text, 3)


def parse_mib(text):
    text = str(text)
    for suffix, mib in (('Ti', 1024 * 1024), ('Gi', 1024), ('Mi', 1)):
        if text.endswith(suffix):
            return int(text[:-2]) * mib
    return int(text)


def parse_range(text, lo, hi):
    if text is None:
        return lo, hi
    s = str(text)
    dash = s.find('-', 1)
    if dash < 0:
        return float(s), float(s)
    return float(s[:dash]), float(s[dash + 1:])


def mig_milli(profile):
    return (int(profile[0]) if profile else 0) * 1000 // 7


def device_request(d):
    d = d or {}
    models = d.get('models') or ''
    if isinstance(models, list):
        models = '|'.join(models)
    req = {'kind': 'none', 'gpus': 0, 'milli': 0, 'gpu_memory': 0, 'profile': '',
           'models': [m for m in models.split('|') if m]}
    gpus = int(d.get('gpus', 0))
    if gpus > 0:
        req.update(kind='whole', gpus=min(gpus, 1000))
    elif 'gpuMilli' in d or 'gpuMemory' in d:
        req.update(kind='fraction', gpus=1, milli=parse_milli(d.get('gpuMilli', '0')),
                   gpu_memory=parse_mib(d.get('gpuMemory', '0')))
    elif 'mig' in d:
        req.update(kind='mig', gpus=1, profile=d['mig'])
    return req


def total_milli(req):  # DeviceRequest::TotalMilli, one pod
    return {'none': 0, 'whole': 1000 * req['gpus'], 'fraction': req['milli'],
            'mig': mig_milli(req['profile'])}[req['kind']]


def pod_milli(req, mean_gpu_memory):  # PodMilli: a memory-only share by the fleet's mean GPU
    m = total_milli(req)
    if m > 0 or req['kind'] != 'fraction' or mean_gpu_memory <= 0:
        return float(m)
    return float(min(1000, math.ceil(1000 * float(req['gpu_memory']) / mean_gpu_memory)))


def cround(x):  # std::round / llround: halves away from zero
    f = math.floor(abs(x))
    r = f + (1 if abs(x) - f >= 0.5 else 0)
    return r if x >= 0 else -r


class MT64:
    """std::mt19937_64, specified exactly by the C++ standard; draws as sched/rng.h's Rng."""
    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & 0xFFFFFFFFFFFFFFFF
        for i in range(1, 312):
            self.mt[i] = (6364136223846793005 * (self.mt[i - 1] ^ (self.mt[i - 1] >> 62)) + i) \
                & 0xFFFFFFFFFFFFFFFF
        self.i = 312

    def next(self):
        if self.i >= 312:
            mt = self.mt
            for k in range(312):
                x = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1:
                    xa ^= 0xB5026F5AA96619E9
                mt[k] = mt[(k + 156) % 312] ^ xa
            self.i = 0
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & 0xFFFFFFFFFFFFFFFF

    def uniform(self, n):
        limit = 0xFFFFFFFFFFFFFFFF - 0xFFFFFFFFFFFFFFFF % n
        while True:
            v = self.next()
            if v < limit:
                return v % n

    def uniform_double(self):
        return (self.next() >> 11) * 2.0 ** -53


MIG_GEOMETRY = [['3g.40gb', '2g.20gb', '1g.10gb', '1g.10gb']] * 4 + \
    [['2g.20gb', '2g.20gb', '2g.20gb', '1g.10gb']] * 2 + [['1g.10gb'] * 7] * 2
MACHINES = {'h100': ('H100', 80, 8, 224, 2048), 'h200': ('H200', 141, 8, 224, 2048),
            'gb200': ('GB200', 186, 4, 144, 960)}


def synthetic_fleet(gpus, gb200_share, mig_share, h200_share):
    """MakeSyntheticFleet (src/sim/synthetic.cc): HGX H100, then H200, then GB200 trays."""
    gb200_racks = min(cround(gpus * gb200_share / 72), gpus // 72)
    hgx = (gpus - gb200_racks * 72) // 8
    h200 = cround(hgx * h200_share)
    nodes = []

    def section(system, count, per_rack, per_leaf, nvl_rack, mig_share):
        model, gib, ngpu, cores, mem = MACHINES[system]
        for i in range(count):
            r = i // per_rack
            rack = f'{system}-r{r:04d}'
            name = f'{rack}-n{i % per_rack:02d}'
            mig = math.floor((r + 1) * mig_share) > math.floor(r * mig_share)
            nodes.append({'name': name, 'cpu': cores * 1000, 'memory': mem * 1024,
                          'gpus': [{'model': model, 'memory': gib * 1024,
                                    'mig': list(MIG_GEOMETRY[d]) if mig else []}
                                   for d in range(ngpu)],
                          'rack': rack, 'leaf': f'{system}-leaf{r // per_leaf:03d}',
                          'nvlink': rack if nvl_rack else name})
    section('h100', hgx - h200, 8, 4, False, mig_share)
    section('h200', h200, 8, 4, False, 0)
    section('gb200', gb200_racks * 18, 18, 8, True, 0)
    return nodes


def fnv1a(s):
    h = 14695981039346656037
    for c in s.encode():
        h ^= c
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def read_csv(path):
    with open(path, newline='') as f:
        rows = [line.rstrip('\n').replace('\r', '').split(',') for line in f if line.strip()]
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:]]


class Scenario:
    """What the replay builds from a scenario file: fleet, workloads, guarantees, weights."""

    def __init__(self, path, trace_dir=None, load=None):
        with open(path) as f:
            self.doc = doc = mini_yaml(f.read())
        self.path = path
        self.notes = []  # what could not be rebuilt, said in the output
        self.name = doc.get('name')
        self.load = float(load) if load is not None else _num(doc.get('load'), 1.0)
        self.interval = _num(doc.get('interval'), 1.0)
        self.grace = _num(doc.get('grace'), 30.0)
        self.guarantee_share = _num(doc.get('guaranteeShare'), 1.0)
        adm = doc.get('admission') or {}
        self.queue_tree = bool(adm.get('queues'))
        self.reclaim_min_runtime = _num(adm.get('reclaimMinRuntime'), 3600.0)
        self.teams = []
        for t in doc['teams']:
            tm = {'name': t['name'], 'share': float(t['share']),
                  'trust': t.get('trust', 'standard'),
                  'trust_domain': t.get('trustDomain', t['name']),
                  'weight': float(t['weight']) if 'weight' in t else 0.0,
                  'priority': int(t.get('priority', 0)),
                  'min_runtime': _num(t.get('minRuntime'), 0.0),
                  'checkpoint': _num(t.get('checkpointInterval'), 0.0),
                  'budget': int(t.get('disruptionBudget', -1)),
                  'reclaim_min_runtime': _num(t.get('reclaimMinRuntimeSeconds')),
                  'guarantee': parse_milli(t['guarantee']) if 'guarantee' in t else None,
                  'borrowing': parse_milli(t['borrowingLimit']) if 'borrowingLimit' in t
                  else None,
                  'templates': []}
            tm['active'] = parse_range(t.get('active'), 0.0, 1.0)
            for w in t.get('workloads') or []:
                pods = parse_range(w.get('pods'), 1, 1)
                dur = parse_range(w.get('duration'), 60, 3600)
                topo = w.get('topology') or {}
                tm['templates'].append({
                    'weight': _num(w.get('weight'), 1.0),
                    'pods': (int(pods[0]), int(pods[1])), 'min_pods': int(w.get('minPods', 0)),
                    'cpu': parse_milli(w.get('cpu', '1')),
                    'memory': parse_mib(w.get('memory', '4096')),
                    'device': device_request(w.get('devices')),
                    'duration': dur,
                    'topology_required': topo.get('mode', 'preferred') == 'required' and
                    topo.get('level', 'none') != 'none',
                    'priority': int(w['priority']) if 'priority' in w else None,
                    'min_runtime': _num(w.get('minRuntime')),
                    'checkpoint': _num(w.get('checkpointInterval')),
                })
            self.teams.append(tm)
        self.left_out = self.left_out_zero = 0
        self.copies = self.compression = 1.0
        if 'trace' in doc:
            self._openb(doc, trace_dir)
        else:
            self._synthetic(doc['synthetic'] or {})
        self.cap_gpu = 1000.0 * sum(len(n['gpus']) for n in self.nodes)
        for i, w in enumerate(self.workloads):
            w['index'] = i  # (the replay's workload index: its queue order's last key)
        self.by_name = {w['w']: w for w in self.workloads}
        self._calibrate()

    # ---- the fleet and the workloads ----
    def _synthetic(self, s):
        self.kind = 'synthetic'
        self.window = _num(s.get('window'), 86400.0)
        self.nodes = synthetic_fleet(int(s.get('gpus', 1024)), _num(s.get('gb200Share'), 0.0),
                                     _num(s.get('migShare'), 0.1),
                                     _num(s.get('h200Share'), 1.0 / 3.0))
        total = sum(len(n['gpus']) for n in self.nodes)
        self.mean_gpu_memory = sum(g['memory'] for n in self.nodes for g in n['gpus']) / \
            max(1, total)
        cap = float(total) * 1000
        rng = MT64(int(s.get('seed', 1)))
        serial = 0
        out = []
        for ti, team in enumerate(self.teams):
            target = team['share'] / 100.0 * self.load * cap * self.window
            tw = sum(t['weight'] for t in team['templates'])
            acc = 0.0
            while acc < target:
                r = rng.uniform_double() * tw
                k = 0
                tpls = team['templates']
                while k + 1 < len(tpls) and r >= tpls[k]['weight']:
                    r -= tpls[k]['weight']
                    k += 1
                t = tpls[k]
                serial += 1
                count = t['pods'][0] + rng.uniform(t['pods'][1] - t['pods'][0] + 1)
                least = t['min_pods'] if 0 < t['min_pods'] < count else count
                u = rng.uniform_double()
                lo, hi = t['duration']
                duration = float(cround(lo * math.pow(hi / lo, u)))
                a0, a1 = team['active']
                arrival = float(math.floor((a0 + rng.uniform_double() * (a1 - a0)) * self.window))
                ps = dict(t['device'], count=count, least=least, cpu=t['cpu'],
                          memory=t['memory'])
                out.append(self._workload(
                    f"{team['name']}-{serial:05d}", ti, arrival, duration, [ps],
                    t['topology_required'],
                    t['priority'] if t['priority'] is not None else team['priority'],
                    t['min_runtime'] if t['min_runtime'] is not None else team['min_runtime'],
                    t['checkpoint'] if t['checkpoint'] is not None else team['checkpoint']))
                acc += pod_milli(t['device'], self.mean_gpu_memory) * count * \
                    min(duration, self.window - arrival)
        out.sort(key=lambda w: w['arrival'])  # (stable, as std::stable_sort)
        self.workloads = out

    def _openb(self, doc, trace_dir):
        self.kind = 'openb'
        tr = doc['trace']
        d = trace_dir
        if not d:
            d = tr['dir']
            if not d.startswith('/'):
                d = os.path.join(os.path.dirname(self.path) or '.', d)
        self.window = _num(doc.get('window'), 86400.0)
        max_gap = _num(doc.get('maxGap'), 3600.0)
        block = int(doc.get('teamBlock', 1))
        self.nodes = []
        for row in read_csv(os.path.join(d, tr['nodes'])):
            g = int(row['gpu'])
            if g == 0:
                continue
            self.nodes.append({'name': row['sn'], 'cpu': int(row['cpu_milli']),
                               'memory': int(row['memory_mib']),
                               'gpus': [{'model': row['model'], 'memory': 0, 'mig': []}] * g,
                               'rack': '', 'leaf': '', 'nvlink': row['sn']})
        self.mean_gpu_memory = 0.0
        base = []
        for row in read_csv(os.path.join(d, tr['pods'])):
            c, dl, s = (int(row[k]) if row.get(k, '') != '' else -1
                        for k in ('creation_time', 'deletion_time', 'scheduled_time'))
            if s >= 0 and c >= 0 and dl <= s:
                self.left_out_zero += 1
                continue
            if s < 0 or c < 0:
                self.left_out += 1
                continue
            name = row['name']
            team = self._team_of_pod(name, block)
            n, gm = int(row['num_gpu']), int(row['gpu_milli'])
            spec = row.get('gpu_spec', '')
            dev = {'kind': 'none', 'gpus': 0, 'milli': 0, 'gpu_memory': 0, 'profile': '',
                   'models': [m for m in spec.split('|') if m]}
            if n > 0 and gm == 1000:
                dev.update(kind='whole', gpus=n)
            elif n > 0:
                dev.update(kind='fraction', gpus=1, milli=gm)
            ps = dict(dev, count=1, least=1, cpu=int(row['cpu_milli']),
                      memory=int(row['memory_mib']))
            tm = self.teams[team]
            base.append(self._workload(name, team, float(c), float(dl - s), [ps], False,
                                       tm['priority'], tm['min_runtime'], tm['checkpoint']))
        # TileTrace: quiet spells shortened, compressed into the window, overlaid `load` times.
        base.sort(key=lambda w: w['arrival'])
        prev, at = base[0]['arrival'], 0.0
        for w in base:
            at += min(w['arrival'] - prev, max_gap)
            prev = w['arrival']
            w['arrival'] = at
        first = min(w['arrival'] for w in base)
        last = max(w['arrival'] for w in base)
        self.compression = max(1.0, last - first) / self.window
        for w in base:
            w['arrival'] = float(math.floor((w['arrival'] - first) / self.compression))
        cap = float(sum(len(n['gpus']) for n in self.nodes)) * 1000
        one = self._clipped(base, self.window)
        k = self.load * cap * self.window / one if one > 0 else 1
        self.copies = k
        whole, total = math.floor(k), math.ceil(k)
        out = []
        for j in range(total):
            for w in base:
                if j == whole and (fnv1a(w['w'] + '#copy') % 1000000) / 1e6 >= k - whole:
                    continue
                c = dict(w)
                if j > 0:
                    c['w'] = f"{w['w']}-c{j}"
                    c['arrival'] = min(w['arrival'] + float(fnv1a(c['w']) % 60),
                                       math.floor(self.window) - 1.0)
                out.append(c)
        out.sort(key=lambda w: w['arrival'])
        self.workloads = out

    def _team_of_pod(self, name, block):
        key = name
        stripped = name.rstrip('0123456789')
        if block > 1 and stripped != name and stripped:
            key = f'{stripped}block-{int(name[len(stripped):]) // block}'
        bucket, acc = fnv1a(key) % 100, 0.0
        for i, t in enumerate(self.teams):
            acc += t['share']
            if bucket < acc:
                return i
        return len(self.teams) - 1

    def _workload(self, name, team, arrival, duration, sets, topology_required, priority,
                  min_runtime, checkpoint):
        return {'w': name, 'team': team, 'arrival': arrival, 'duration': duration,
                'sets': sets, 'topology_required': topology_required, 'priority': priority,
                'min_runtime': min_runtime, 'checkpoint': checkpoint}

    def milli(self, w):  # WorkloadMilli
        return sum(pod_milli(s, self.mean_gpu_memory) * s['count'] for s in w['sets'])

    def _clipped(self, ws, window):
        d = 0.0
        for w in ws:
            d += self.milli(w) * max(0.0, min(w['duration'], window - w['arrival']))
        return d

    # ---- what the whole fleet, empty, can run ----
    def pod_fits_node(self, s, n):
        """One pod of set s on empty node n (cores, memory, GPUs of a model it allows, GPU
        memory, MIG slices of its profile)."""
        if s['cpu'] > n['cpu'] or s['memory'] > n['memory']:
            return False
        if s['kind'] == 'none':
            return True
        if not n['gpus'] or (s['models'] and n['gpus'][0]['model'] not in s['models']):
            return False
        if s['kind'] == 'whole':
            return sum(1 for g in n['gpus'] if not g['mig']) >= s['gpus']
        if s['kind'] == 'fraction':
            for g in n['gpus']:
                if g['mig']:
                    continue
                if s['milli'] == 0 and g['memory'] <= 0 and not self._memory_gpu(s):
                    continue
                if g['memory'] > 0 and s['gpu_memory'] > g['memory']:
                    continue
                return True
            return False
        return any(s['profile'] in g['mig'] for g in n['gpus'])

    def _memory_gpu(self, s):
        return any(g['memory'] > 0 and not g['mig'] for n in self.nodes for g in n['gpus']
                   if not s['models'] or g['model'] in s['models'])

    def runs_on_empty_fleet(self, w, nodes=None):
        """True or False where it is sure, None where the pods fit one by one but a greedy
        packing of them together fails (the replay's FleetHoldsPods may still find one)."""
        nodes = self.nodes if nodes is None else nodes
        if w['topology_required']:
            return None  # (the domain check: not rebuilt here)
        if not nodes:
            return False
        for s in w['sets']:
            if not any(self.pod_fits_node(s, n) for n in nodes):
                return False
        pods = sum(s['count'] for s in w['sets'])
        if pods == 1:
            return True
        # More pods of a set than the whole fleet holds of that set alone: sure it cannot.
        for s in w['sets']:
            if s['count'] > sum(self._most_pods(s, n) for n in nodes):
                return False
        # Pods together: first fit, largest first, on empty copies of the nodes that take one.
        free = {}
        for s in sorted(w['sets'], key=lambda s: -total_milli(s)):
            for _ in range(s['count']):
                for n in nodes:
                    if not self.pod_fits_node(s, n):
                        continue
                    f = free.setdefault(n['name'], [n['cpu'], n['memory'],
                                                    [1000] * len(n['gpus']),
                                                    [list(g['mig']) for g in n['gpus']]])
                    if f[0] < s['cpu'] or f[1] < s['memory']:
                        continue
                    take = self._take(s, n, f)
                    if take:
                        f[0] -= s['cpu']
                        f[1] -= s['memory']
                        break
                else:
                    return None
        return True

    def _most_pods(self, s, n):
        """At most how many pods of set s empty node n holds (cores, memory, GPUs)."""
        if not self.pod_fits_node(s, n):
            return 0
        most = min(n['cpu'] // s['cpu'] if s['cpu'] > 0 else 10 ** 9,
                   n['memory'] // s['memory'] if s['memory'] > 0 else 10 ** 9)
        if s['kind'] == 'whole':
            most = min(most, sum(1 for g in n['gpus'] if not g['mig']) // s['gpus'])
        elif s['kind'] == 'fraction':
            most = min(most, sum(1000 // max(1, s['milli']) for g in n['gpus'] if not g['mig']))
        elif s['kind'] == 'mig':
            most = min(most, sum(g['mig'].count(s['profile']) for g in n['gpus']))
        return most

    def _take(self, s, n, f):
        gp = f[2]
        if s['kind'] == 'none':
            return True
        if s['kind'] == 'whole':
            idx = [d for d, g in enumerate(n['gpus']) if not g['mig'] and gp[d] == 1000][:s['gpus']]
            if len(idx) < s['gpus']:
                return False
            for d in idx:
                gp[d] = 0
            return True
        if s['kind'] == 'fraction':
            for d, g in enumerate(n['gpus']):
                if not g['mig'] and gp[d] >= max(1, s['milli']):
                    gp[d] -= max(1, s['milli'])
                    return True
            return False
        for d in range(len(n['gpus'])):
            if s['profile'] in f[3][d]:
                f[3][d].remove(s['profile'])
                return True
        return False

    # ---- guarantees and weights (Calibrate) ----
    def _calibrate(self):
        runs = {}
        undetermined = 0
        for w in self.workloads:
            r = self.runs_on_empty_fleet(w)
            if r is None:
                undetermined += 1
            runs[w['w']] = r
        self.runs = runs
        self.undetermined = undetermined
        explicit = any(t['guarantee'] is not None for t in self.teams)
        mig_cap = 1000.0 * sum(1 for n in self.nodes for g in n['gpus'] if g['mig'])
        self.mig_cap = mig_cap
        if self.queue_tree:
            self.mig_pool = False
            self.guarantees = None  # (a queue tree's: not rebuilt here)
            self.notes.append('admission.queues: the queue tree\'s guarantees and weights are not '
                              'rebuilt; guarantees, pools and weights are the log\'s')
            return
        self.mig_pool = (not explicit) and mig_cap > 0
        pool_cap = [self.cap_gpu - (mig_cap if self.mig_pool else 0),
                    mig_cap if self.mig_pool else 0]
        demand = [[0.0, 0.0] for _ in self.teams]
        for w in self.workloads:
            if runs[w['w']] is not False:  # (undetermined ones counted as runnable; said above)
                p = 1 if self.mig_pool and self.is_mig(w) else 0
                demand[w['team']][p] += self.milli(w) * max(0.0, min(w['duration'],
                                                                     self.window - w['arrival']))
        fixed = 0.0
        open_ = [0.0, 0.0]
        for i, t in enumerate(self.teams):
            if t['guarantee'] is not None:
                fixed += t['guarantee']
            else:
                for p in range(2):
                    open_[p] += demand[i][p]
        rest = [max(0.0, pool_cap[0] * self.guarantee_share - fixed),
                pool_cap[1] * self.guarantee_share]
        self.guarantees = []
        for i, t in enumerate(self.teams):
            if t['guarantee'] is not None:
                self.guarantees.append([float(t['guarantee']), 0.0])
                continue
            g = []
            for p in range(2):
                exact = rest[p] * demand[i][p] / open_[p] if open_[p] > 0 else 0
                g.append(float(math.floor(exact / 1000.0) * 1000))
            self.guarantees.append(g)  # [whole and fractional GPUs, MIG GPUs]
        gsum = sum(sum(g) for g in self.guarantees)
        for i, t in enumerate(self.teams):
            if t['weight'] <= 0:
                t['weight'] = max(0.01, sum(self.guarantees[i]) / gsum) if gsum > 0 else 1.0

    def dedicated_split(self):
        """Under dedicated, the nodes each team owns (RunReplay): each GPU model's nodes, MIG
        nodes apart, in fleet order, split by the teams' guarantees in that pool, largest
        remainder first, each team's rounding carried from one model to the next in GPUs; a
        team guaranteed GPUs but left without a node takes one from the team furthest ahead,
        and a team with MIG work but no MIG node one from the team with the most."""
        nt = len(self.teams)
        guarantee = [sum(g) for g in self.guarantees]
        split = [list(g) for g in self.guarantees]
        if not self.mig_pool:
            demand = [[0.0, 0.0] for _ in range(nt)]
            for w in self.workloads:
                demand[w['team']][1 if self.is_mig(w) else 0] += self.milli(w) * w['duration']
            for i in range(nt):
                total = demand[i][0] + demand[i][1]
                mig = guarantee[i] * demand[i][1] / total if total > 0 else 0
                split[i] = [guarantee[i] - mig, mig]
        gsum = [0.0, 0.0]
        for g in split:
            for p in range(2):
                gsum[p] += g[p]
        for p in range(2):
            if gsum[p] <= 0:
                for i in range(nt):
                    split[i][p] = guarantee[i]
                    gsum[p] += guarantee[i]
        by_model = defaultdict(list)
        for k, n in enumerate(self.nodes):
            model = n['gpus'][0]['model'] if n['gpus'] else ''
            by_model[(model, 1 if any(g['mig'] for g in n['gpus']) else 0)].append(k)
        owned = [[] for _ in range(nt)]
        carry = [[0.0, 0.0] for _ in range(nt)]
        for (model, pool), nodes in sorted(by_model.items()):
            gpus = float(sum(len(self.nodes[k]['gpus']) for k in nodes))
            total = len(nodes)
            per_node = max(1.0, gpus / total)
            exact = [total * split[i][pool] / gsum[pool] if gsum[pool] > 0 else 0
                     for i in range(nt)]
            want = [exact[i] + carry[i][pool] / per_node for i in range(nt)]
            count = [max(0, math.floor(x)) for x in want]
            given = sum(count)
            while given > total:
                most = -1
                for i in range(nt):
                    if count[i] > 0 and (most < 0 or
                                         count[i] - want[i] > count[most] - want[most]):
                        most = i
                count[most] -= 1
                given -= 1
            while given < total:
                most = 0
                for i in range(1, nt):
                    if want[i] - count[i] > want[most] - count[most]:
                        most = i
                count[most] += 1
                given += 1
            at = 0
            for i in range(nt):
                carry[i][pool] += (exact[i] - count[i]) * per_node
                owned[i].extend(nodes[at:at + count[i]])
                at += count[i]
        for i in range(nt):
            if owned[i] or guarantee[i] <= 0:
                continue
            donor, ahead = -1, 0.0
            for j in range(nt):
                past = -(carry[j][0] + carry[j][1])
                if len(owned[j]) > 1 and (donor < 0 or past > ahead):
                    donor, ahead = j, past
            if donor < 0:
                break
            owned[i].append(owned[donor].pop())
        # Nor a team with MIG work without a MIG node while another owns more than one: the
        # one with the most gives its last.
        def mig_node(k):
            return any(g['mig'] for g in self.nodes[k]['gpus'])

        def mig_owned(i):
            return sum(1 for k in owned[i] if mig_node(k))
        for i in range(nt):
            if split[i][1] <= 0 or mig_owned(i) > 0:
                continue
            donor = -1
            for j in range(nt):
                if mig_owned(j) > 1 and (donor < 0 or mig_owned(j) > mig_owned(donor)):
                    donor = j
            if donor < 0:
                break
            last = max(x for x in range(len(owned[donor])) if mig_node(owned[donor][x]))
            owned[i].append(owned[donor].pop(last))
        return [[self.nodes[k]['name'] for k in sorted(o)] for o in owned]

    @staticmethod
    def is_mig(w):
        return any(s['kind'] == 'mig' for s in w['sets'])


def find_scenario(name, log_path):
    """The scenario file named `name` (its `name:`), among the repository's scenarios and test
    data, and the directories of the log."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [os.path.join(here, '..', 'scenarios'), os.path.join(here, '..', 'tests', 'data',
                                                                   'replay'),
            os.path.dirname(os.path.abspath(log_path)), 'scenarios']
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith(('.yaml', '.yml')):
                continue
            p = os.path.join(d, f)
            try:
                with open(p) as fh:
                    for line in fh:
                        if line.startswith('name:') and _scalar(_strip_comment(line)[5:]) == name:
                            return p
            except OSError:
                continue
    return None


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


SIZES = ['<1', '1', '2-8', '9-32', '33+']


def size_bucket(milli):
    milli = int(milli)
    if milli == 0:
        return None
    return 0 if milli < 1000 else 1 if milli == 1000 else 2 if milli <= 8000 else \
        3 if milli <= 32000 else 4


SET_FIELDS = ('count', 'least', 'kind', 'gpus', 'milli', 'gpu_memory', 'profile', 'models', 'cpu',
              'memory')
POD_FIELDS = ('kind', 'cpu', 'memory', 'gpus', 'gpu_memory', 'profile', 'models')


class Checker:
    def __init__(self, header, sc=None):
        self.errors = []
        self.suppressed = 0  # violations past the first 50, counted, not listed
        self.notes = []
        self.now = None
        self.sc = sc
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
        nt = len(self.teams)
        self.weights = [t['weight'] for t in self.teams]
        if sc is not None:
            self.check_header(header)
        self.cap_gpu = 1000.0 * sum(len(n['gpus']) for n in self.nodes.values())
        self.cap_cpu = max(1.0, float(sum(n['cpu'] for n in self.nodes.values())))
        self.cap_mem = max(1.0, float(sum(n['memory'] for n in self.nodes.values())))
        self.team_nodes = [set(t['nodes']) if t.get('nodes') is not None else None
                           for t in self.teams]
        if self.policy == 'dedicated' and sc is not None and sc.guarantees is not None:
            mine = sc.dedicated_split()
            for t, names in zip(self.teams, mine):
                if list(t.get('nodes') or []) != names:
                    self.error(f"team {t['name']}: its dedicated nodes in the log "
                               f"({len(t.get('nodes') or [])}: {(t.get('nodes') or [])[:3]}...) "
                               f"are not the scenario's split ({len(names)}: {names[:3]}...)")
        elif self.policy == 'dedicated':
            self.notes.append('NOT RECOMPUTED: the dedicated split of the nodes (the log\'s)')
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
        self.setup_guarantees()
        # Live state.
        self.runs = {}  # run -> (workload, pods)
        self.wl = {}    # workload -> its record
        self.use = [[0.0, 0.0, 0.0] for _ in range(nt)]   # GPU milli, cpu, memory held
        self.pend = [[0.0, 0.0, 0.0] for _ in range(nt)]  # the same, of pending workloads
        self.alloc = 0.0
        self.touched = set()
        # The guarantee's units (2 x team + pool): GPU milli held, pending sizes (not
        # policy-blocked), policy-blocked work pending (to the end).
        self.unit_use = [0.0] * (2 * nt)
        self.unit_pend = [Counter() for _ in range(2 * nt)]
        self.unit_blocked = [0] * (2 * nt)
        self.unit_min = [None] * (2 * nt)
        # The guarantee bound, "alone" view (each pending workload against its unit's room by
        # itself): pending workloads by size, the room at the last refit, units changed since.
        self.bound_pend = [defaultdict(set) for _ in range(2 * nt)]
        self.room_seen = list(self.guar) if self.guar is not None else None
        self.bound_dirty = set()
        self.bound_phase = None  # 'events' or 'cycle': what the lines of this instant were
        self.bound = [{'checked': 0, 'over': 0, 'worst': 0.0, 'by_admission': 0,
                       'by_stop': 0, 'at_end': 0} for _ in range(2)]
        self.order = [[] for _ in range(2 * nt)]  # pending (-priority, arrival, index, name)
        self.fit_in_order = [set() for _ in range(2 * nt)]
        # Guarantee episodes: spans in which a unit is below its guarantee with pending work
        # that fits; when each began and the longest remaining minimum runtime of the victims
        # evicted for its work.
        self.ep_start = [None] * (2 * nt)
        self.ep_mr = [0.0] * (2 * nt)
        self.episodes = {'episodes': 0, 'exceptions': 0, 'worst_excess_s': 0.0}
        # Integrals over the window.
        self.clock = self.w0
        self.alloc_int = 0.0
        self.lost_int = 0.0
        self.lost_s = 0.0
        self.team_lost = [0.0] * nt
        self.share_int = [0.0] * nt
        self.fair_int = [0.0] * nt
        self.below_int = [0.0] * nt
        self.below_any_int = [0.0] * nt
        self.evictions = 0
        self.preempted = [0] * nt
        self.preempted_by = [Counter() for _ in range(nt)]
        self.shrinks = 0
        self.shrink_pods = 0
        self.growths = 0
        self.partial = 0
        self.infeasible_mismatch = []
        self.infeasible_undetermined = 0
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

    def error(self, msg, always=False):
        if len(self.errors) < 50 or always:
            self.errors.append((self.now, msg))
        else:
            self.suppressed += 1

    # ---- the header against the rebuilt scenario ----
    def check_header(self, header):
        sc = self.sc
        mine = [(n['name'], n['cpu'], n['memory'],
                 [(g['model'], g['memory'], list(g['mig'])) for g in n['gpus']])
                for n in sc.nodes]
        theirs = [(n['name'], n['cpu'], n['memory'],
                   [(g['model'], g['memory'], list(g['mig'])) for g in n['gpus']])
                  for n in header['nodes']]
        if mine != theirs:
            bad = next((f'{a} / {b}' for a, b in zip(mine, theirs) if a != b),
                       f'{len(mine)} nodes rebuilt, {len(theirs)} in the log')
            self.error(f'the log\'s nodes are not the scenario\'s fleet (rebuilt / log): {bad}')
        else:
            # The rebuilt nodes (with their racks and leaves) from here on.
            self.nodes = {n['name']: dict(n) for n in sc.nodes}
        names = [t['name'] for t in sc.teams]
        if names != [t['name'] for t in self.teams]:
            self.error(f"the log's teams {[t['name'] for t in self.teams]} are not the "
                       f"scenario's {names}")
            return
        for t, mt in zip(self.teams, sc.teams):
            for key, mine_v in (('trust', mt['trust']), ('trust_domain', mt['trust_domain'])):
                if t[key] != mine_v:
                    self.error(f"team {t['name']}: {key} {t[key]!r} in the log, "
                               f"{mine_v!r} in the scenario")
        if sc.queue_tree:
            self.notes.append('NOT RECOMPUTED: fairness weights (an explicit queue tree); '
                              'the log\'s are used')
            return
        for i, (t, mt) in enumerate(zip(self.teams, sc.teams)):
            if abs(t['weight'] - mt['weight']) > 1e-9 * max(1.0, mt['weight']):
                self.error(f"team {t['name']}: weight: the log says {t['weight']}, the scenario "
                           f"gives {mt['weight']}")
        self.weights = [mt['weight'] for mt in sc.teams]

    def setup_guarantees(self):
        """Each team's guarantee per pool (0: whole and fractional GPUs, 1: MIG GPUs)."""
        sc = self.sc
        nt = len(self.teams)
        self.guar = None
        self.mig_units = False
        if sc is None or sc.guarantees is None:
            self.notes.append('NOT RECOMPUTED: guarantees, below_guarantee_pending_s, '
                              'below_guarantee_any_pending_s, guarantee_gpus (' +
                              ('no scenario' if sc is None else 'an explicit queue tree') + ')')
            return
        pools = [list(g) for g in sc.guarantees]
        self.mig_units = sc.mig_pool or any(g[1] > 0 for g in pools)
        if self.policy == 'dedicated':
            for i in range(nt):
                names = self.team_nodes[i] or ()
                gpus = [g for n in names if n in self.nodes for g in self.nodes[n]['gpus']]
                total = 1000.0 * len(gpus)
                mig = 1000.0 * sum(1 for g in gpus if g['mig']) if self.mig_units else 0.0
                pools[i] = [total - mig, mig]
        self.guar = [pools[u // 2][u % 2] for u in range(2 * nt)]
        self.guarantee_gpus = [sum(p) / 1000.0 for p in pools]

    def smallest(self, k):
        """The smallest pending workload of unit k (GPU milli), kept until its pending changes."""
        m = self.unit_min[k]
        if m is None:
            m = self.unit_min[k] = min(self.unit_pend[k])
        return m

    def below(self, k):
        room = self.guar[k] - self.unit_use[k]
        return room > 0 and bool(self.unit_pend[k]) and self.smallest(k) <= room + 1e-9

    def close_episode(self, k, at):
        length = at - self.ep_start[k]
        bound = self.sc.interval + self.grace + self.ep_mr[k]
        self.episodes['episodes'] += 1
        self.episodes['worst_excess_s'] = max(self.episodes['worst_excess_s'], length - bound)
        if length > bound + 1e-9:
            self.episodes['exceptions'] += 1
        self.ep_start[k] = None
        self.ep_mr[k] = 0.0

    def unit_of(self, rec):
        return 2 * rec['team'] + (1 if self.mig_units and rec['is_mig'] else 0)

    # ---- the guarantee bound, alone view (informational) ----
    # Views of "pending work that fits" (the replay's kInOrder and kAlone): 0, each workload in
    # its queue's order counted when it fits in what those before it that fit have left; 1,
    # each against the room by itself.
    def bound_limit(self, rec, view):
        return self.sc.interval + self.grace + rec['vmr'][view]

    def start_fitting(self, rec, view, t):
        if rec['fits'][view] is None and self.w0 <= t <= self.w1:
            rec['fits'][view] = t
            rec['vmr'][view] = 0.0

    def check_wait(self, rec, view, t, how):
        wait = t - rec['fits'][view]
        b = self.bound[view]
        b['checked'] += 1
        b[how] += 1
        limit = self.bound_limit(rec, view)
        b['worst'] = max(b['worst'], wait - limit)
        if wait - limit > 1e-9:
            b['over'] += 1
        if view == 0:
            rec.setdefault('waits', []).append((wait, limit))
        rec['fits'][view] = None

    def stop_fitting(self, rec, view, t):
        if t - rec['fits'][view] > self.bound_limit(rec, view) + 1e-9:
            self.check_wait(rec, view, t, 'by_stop')
        else:
            rec['fits'][view] = None

    def refit(self):
        """The replay's refit of each changed unit: alone, the workloads whose size lies between
        the old and the new room start or stop fitting; in order, the queue is walked."""
        for u in sorted(self.bound_dirty):
            room = self.guar[u] - self.unit_use[u] + 1e-9
            lo, hi = min(room, self.room_seen[u]), max(room, self.room_seen[u])
            for size in sorted(k for k in self.bound_pend[u] if lo < k <= hi):
                for w in sorted(self.bound_pend[u][size], key=lambda w: self.wl[w]['okey']):
                    rec = self.wl[w]
                    if size <= room:
                        self.start_fitting(rec, 1, self.now)
                    elif rec['fits'][1] is not None:
                        self.stop_fitting(rec, 1, self.now)
            self.room_seen[u] = room
            fit = set()
            left = room
            smallest = self.smallest(u) if self.unit_pend[u] else 0
            for key in self.order[u]:
                if left < smallest:
                    break
                rec = self.wl[key[3]]
                if rec['milli'] > left:
                    continue
                left -= rec['milli']
                fit.add(key[3])
            for w in sorted(self.fit_in_order[u] - fit, key=lambda w: self.wl[w]['okey']):
                if self.wl[w]['fits'][0] is not None:
                    self.stop_fitting(self.wl[w], 0, self.now)
            for w in sorted(fit, key=lambda w: self.wl[w]['okey']):
                self.start_fitting(self.wl[w], 0, self.now)
            self.fit_in_order[u] = fit
        self.bound_dirty.clear()

    def bound_line(self, ev, why):
        """Within an instant the replay refits once after the events (arrivals, stops) and
        again after the admission cycle (starts, evictions): the log's lines show which."""
        if self.guar is None or self.sc is None:
            return
        phase = 'cycle' if ev in ('place', 'evict') or why == 'released' else 'events'
        if phase != self.bound_phase:
            if phase == 'cycle':
                self.refit()
            self.bound_phase = phase

    # ---- time ----
    def advance(self, t):
        if self.now is not None and t < self.now - EPS:
            self.error(f'time goes back from {self.now} to {t}')
        if self.now is not None and t > self.now:
            if self.guar is not None and self.sc is not None:
                self.refit()
                self.bound_phase = None
            self.check_instant()
            if self.idle_every is not None and self.cycle_now and self.now >= self.next_idle:
                self.next_idle = self.now + self.idle_every
                self.check_idle()
            self.cycle_now = False
        if t > self.clock and self.guar is not None and self.sc is not None:
            for k in range(len(self.guar)):
                below = self.below(k)
                if below and self.ep_start[k] is None and self.w0 <= self.clock <= self.w1:
                    self.ep_start[k] = self.clock
                if not below and self.ep_start[k] is not None:
                    self.close_episode(k, self.clock)
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
                if self.guar is not None:
                    below = below_any = False
                    for k in (2 * i, 2 * i + 1):
                        room = self.guar[k] - self.unit_use[k]
                        pend = self.unit_pend[k]
                        if room > 0 and pend and self.smallest(k) <= room + 1e-9:
                            below = True
                        if room > 1e-9 and (pend or self.unit_blocked[k] > 0):
                            below_any = True
                    if below:
                        self.below_int[i] += dt
                    if below_any:
                        self.below_any_int[i] += dt
            for i, f in enumerate(water_fill(demand, self.weights, 1.0)):
                self.fair_int[i] += f * dt
        self.clock = max(self.clock, t)
        self.now = t
    # ---- holdings ----
    def hold(self, rec, pods, sign):
        team = rec['team']
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
            self.use[team][0] += sign * p['_milli']
            self.use[team][1] += sign * p['_cpu']
            self.use[team][2] += sign * p['_memory']
            self.alloc += sign * p['_milli']
            self.unit_use[self.unit_of(rec)] += sign * p['_milli']
            self.bound_dirty.add(self.unit_of(rec))
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
        u = self.unit_of(rec)
        if rec['blocked']:
            if on:
                self.unit_blocked[u] += 1  # (pending to the end)
        elif on:
            self.unit_pend[u][rec['milli']] += 1
            self.unit_min[u] = None
            if self.room_seen is not None:
                self.bound_pend[u][rec['milli']].add(rec['w'])
                bisect.insort(self.order[u], rec['okey'])
                if rec['milli'] <= self.room_seen[u]:
                    self.start_fitting(rec, 1, self.now)
                self.bound_dirty.add(u)
        else:
            self.unit_min[u] = None
            if self.room_seen is not None:
                self.bound_pend[u][rec['milli']].discard(rec['w'])
                if not self.bound_pend[u][rec['milli']]:
                    del self.bound_pend[u][rec['milli']]
                k = bisect.bisect_left(self.order[u], rec['okey'])
                if k < len(self.order[u]) and self.order[u][k] == rec['okey']:
                    del self.order[u][k]
                for view in (0, 1):
                    if rec['fits'][view] is not None:
                        self.check_wait(rec, view, self.now, 'by_admission')
                self.fit_in_order[u].discard(rec['w'])
                self.bound_dirty.add(u)
            c = self.unit_pend[u]
            c[rec['milli']] -= 1
            if c[rec['milli']] <= 0:
                del c[rec['milli']]
        if on:
            rec['pending_since'] = self.now
        else:
            rec['wait'] += self.now - rec['pending_since']
            rec['pending_since'] = None

    def arrival_record(self, e):
        """The workload as the scenario builds it (checked against the arrive line), or as the
        line gives it (no scenario)."""
        w, t = e['w'], e['t']
        mine = self.sc.by_name.get(w) if self.sc is not None else None
        if self.sc is not None and mine is None:
            self.error(f'{w} arrives, but the scenario has no such workload')
        sets = e.get('sets', [])
        logged = dict(team=e['team'], milli=e['milli'], cpu=e['cpu'], memory=e['memory'],
                      pods=e['pods'], least=e['least_pods'], duration=e['duration_s'],
                      checkpoint=e['checkpoint_s'], sets=sets,
                      topology_required=e.get('topology_required'),
                      is_mig=any(s.get('kind') == 'mig' for s in sets),
                      min_runtime=None, infeasible=e['infeasible'], checked_infeasible=False)
        if mine is None:
            return logged
        sc = self.sc
        mine['_seen'] = True
        sets = [{k: s[k] for k in SET_FIELDS} for s in mine['sets']]
        rec = dict(team=mine['team'], milli=sc.milli(mine),
                   cpu=float(sum(s['cpu'] * s['count'] for s in sets)),
                   memory=float(sum(s['memory'] * s['count'] for s in sets)),
                   pods=sum(s['count'] for s in sets), least=sum(s['least'] for s in sets),
                   duration=mine['duration'], checkpoint=mine['checkpoint'], sets=sets,
                   topology_required=mine['topology_required'], is_mig=sc.is_mig(mine),
                   min_runtime=mine['min_runtime'])
        bad = []
        for key, theirs, ours, tol in (
                ('t', t, mine['arrival'], 1e-9), ('team', e['team'], rec['team'], 0),
                ('milli', e['milli'], rec['milli'], 1e-9), ('cpu', e['cpu'], rec['cpu'], 1e-9),
                ('memory', e['memory'], rec['memory'], 1e-9), ('pods', e['pods'], rec['pods'], 0),
                ('least_pods', e['least_pods'], rec['least'], 0),
                ('duration_s', e['duration_s'], rec['duration'], 1e-9),
                ('checkpoint_s', e['checkpoint_s'], rec['checkpoint'], 1e-9)):
            if abs(theirs - ours) > tol * max(1.0, abs(ours)):
                bad.append(f'{key} {theirs} (the scenario: {ours})')
        if bool(e.get('topology_required')) != bool(rec['topology_required']):
            bad.append(f"topology_required {e.get('topology_required')}")
        logged_sets = [{k: s.get(k) for k in SET_FIELDS} for s in e.get('sets', [])]
        if logged_sets != sets:
            bad.append(f'sets {logged_sets} (the scenario: {sets})')
        if bad:
            # (Said, and the log's workload checked from here on: the run fails either way, and
            # the checks of the log's own consistency still name what else is wrong.)
            self.error(f"{w}: its arrive line is not the scenario's workload: {'; '.join(bad)}")
            rec = logged
        runs = sc.runs.get(w)
        if runs is None:
            self.infeasible_undetermined += 1
            rec['infeasible'] = e['infeasible']  # (not decided here: the log's)
            rec['checked_infeasible'] = False
        else:
            rec['infeasible'] = not runs
            rec['checked_infeasible'] = True
            if e['infeasible'] != rec['infeasible']:
                self.infeasible_mismatch.append(w)
                self.error(f"{w}: infeasible: the log says {e['infeasible']}, but "
                           + ('no node of the empty fleet takes its pods' if rec['infeasible']
                              else 'the empty fleet takes all its pods (first fit)'),
                           len(self.infeasible_mismatch) <= 10)
                rec['infeasible'] = e['infeasible']  # (the log's, from here on: as above)
        return rec

    def policy_blocked(self, rec):
        """Whether this policy can never admit it though the fleet could (None: not decided)."""
        if rec['infeasible'] or self.sc is None:
            return False
        if self.policy == 'dedicated':
            names = self.team_nodes[rec['team']] or ()
            nodes = [self.nodes[n] for n in sorted(names) if n in self.nodes]
            verdict = self.sc.runs_on_empty_fleet(
                dict(sets=rec['sets'], topology_required=rec['topology_required']), nodes)
            if verdict is None:
                self.blocked_undetermined += 1
                return False
            return not verdict
        if self.policy == 'fabrica' and not self.sc.queue_tree:
            t = self.sc.teams[rec['team']]
            if t['borrowing'] is not None and self.sc.guarantees is not None:
                pool = 1 if self.mig_units and rec['is_mig'] else 0
                if pool == 0 and rec['milli'] > self.sc.guarantees[rec['team']][0] + \
                        t['borrowing'] + 1e-9:
                    return True
        return False

    def pod_values(self, w, rec, p):
        """What a placed pod asks (its set's, the scenario's) and the compute it holds."""
        s = rec['sets'][p['set']] if 0 <= p.get('set', -1) < len(rec['sets']) else None
        if s is None:
            self.error(f"{w}: a pod of set {p.get('set')}, which the workload has not")
            s = {k: p.get(k) for k in POD_FIELDS}
            s['milli'] = p['milli']
        elif self.sc is not None:
            diff = [f'{k} {p.get(k)!r} (its set: {s[k]!r})' for k in POD_FIELDS
                    if p.get(k) != s[k]]
            if diff:
                self.error(f"{w}: a placed pod is not of its set: {'; '.join(diff)}")
        if s['kind'] == 'fraction' and s['milli'] == 0:
            # A memory-only share: what its GPU is charged, its memory's share of the GPU's.
            milli = 0.0
            for d in p['devices']:
                n = self.nodes.get(p['node'])
                if n is not None and 0 <= d[0] < len(n['gpus']) and n['gpus'][d[0]]['memory'] > 0:
                    gm = n['gpus'][d[0]]['memory']
                    want = min(999, max(1, min(1000, s['gpu_memory'] * 1000 // gm)))
                    if d[1] != want:
                        self.error(f"{w}: a share of {s['gpu_memory']} MiB charged {d[1]} milli "
                                   f"of {p['node']}/{d[0]}, not {want}")
                milli += d[1]
        else:
            milli = float(total_milli(s))
        if abs(milli - p['milli']) > 1e-9:
            self.error(f"{w}: a placed pod's milli is {p['milli']}, its request {milli}")
        p['_milli'], p['_cpu'], p['_memory'] = milli, float(s['cpu']), float(s['memory'])

    def event(self, e):
        t = e['t']
        self.advance(t)
        ev = e['ev']
        if ev == 'arrive':
            rec = self.arrival_record(e)
            rec.update(w=e['w'], arrival=t, state='pending', wait=0.0, pending_since=t,
                       progress=0.0, main=None, spells=[], start=None, evicted_at=None,
                       evictions=0, fits=[None, None], vmr=[0.0, 0.0])
            mine = self.sc.by_name.get(e['w']) if self.sc is not None else None
            rec['okey'] = (-(mine['priority'] if mine else 0), t,
                           mine['index'] if mine else 0, e['w'])
            self.bound_line(ev, None)
            rec['blocked'] = self.policy_blocked(rec)
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
        self.bound_line(ev, e.get('why'))
        run = e['run']
        if rec['main'] is None and ev == 'place':
            rec['main'] = run
        fragment = run != rec['main']
        if ev == 'place':
            pods = e['pods']
            if e['team'] != rec['team']:
                self.error(f"{w}: placed as team {e['team']}'s, arrived as {rec['team']}'s")
            for p in pods:
                self.pod_values(w, rec, p)
            self.check_pods(w, rec['team'], pods)
            old = self.runs.get(run)
            if old is not None:
                self.hold(rec, old[1], -1)
            self.runs[run] = (w, pods)
            self.hold(rec, pods, +1)
            if fragment:
                return
            self.cycle_now = True
            rate = len(pods) / rec['pods']
            milli = sum(p['_milli'] for p in pods)
            if len(pods) < rec['least'] or len(pods) > rec['pods']:
                self.error(f"{w}: runs {len(pods)} pods; asks {rec['pods']}, "
                           f"at least {rec['least']}")
            if rec['state'] == 'pending':
                if rec['infeasible']:
                    self.error(f'{w}: started though its arrival called it infeasible')
                if rec['blocked']:
                    self.error(f'{w}: started, though this policy could never admit it')
                if t < rec['arrival'] - EPS:
                    self.error(f'{w}: started at {t}, before its arrival at {rec["arrival"]}')
                self.set_pending(rec, False)
                rec['state'] = 'running'
                rec['start'] = t
                rec['ever'] = True
                if len(pods) < rec['pods']:
                    self.partial += 1
                rec['spells'] = [(t, rate, milli)]
            elif rec['state'] == 'running':
                if old is not None and len(pods) > len(old[1]):
                    self.growths += 1
                rec['spells'].append((t, rate, milli))
            else:
                self.error(f"{w}: placed while {rec['state']}")
        elif ev == 'evict':
            if e.get('by') == w:
                self.error(f'{w}: evicted for itself')
            by = self.wl.get(e.get('by'))
            if by is None:
                self.error(f"{w}: evicted by {e.get('by')}, which never arrived")
            if fragment:
                self.runs[run] = self.runs[run] + (t,)
                self.shrinks += 1
                self.shrink_pods += len(self.runs[run][1])
                return
            if rec['state'] != 'running':
                self.error(f"{w}: evicted while {rec['state']}")
            rec['state'] = 'evicting'
            rec['evicted_at'] = t
            rec['evictions'] += 1
            self.evictions += 1
            self.preempted[rec['team']] += 1
            if by is not None:
                self.preempted_by[rec['team']][self.teams[by['team']]['name']] += 1
                if self.sc is not None and self.guar is not None:
                    mr = rec.get('min_runtime') or 0.0
                    if by['team'] != rec['team']:
                        cap = self.sc.teams[rec['team']]['reclaim_min_runtime']
                        mr = min(mr, cap if cap is not None else self.sc.reclaim_min_runtime)

                    def left_at(frm):
                        return min(mr, max(0.0, rec['start'] + mr - frm))
                    for view in (0, 1):
                        if by['fits'][view] is not None:
                            by['vmr'][view] = max(by['vmr'][view], left_at(by['fits'][view]))
                    pu = self.unit_of(by)
                    if self.ep_start[pu] is not None:
                        self.ep_mr[pu] = max(self.ep_mr[pu], left_at(self.ep_start[pu]))
        elif ev == 'free':
            why = e['why']
            held = self.runs.pop(run, None)
            if held is None:
                self.error(f'{w}: frees run {run}, which holds nothing')
                return
            self.hold(rec, held[1], -1)
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
                lost = self.progress_over(rec, frm, t, True) / 1000.0
                self.lost_s += lost
                self.team_lost[rec['team']] += lost
                self.lost_int += self.progress_over(rec, max(frm, self.w0), min(t, self.w1), True)
                rec['state'] = 'pending'
                self.set_pending(rec, True)
            elif why == 'released':
                rec['state'] = 'pending'
                rec['okey'] = (rec['okey'][0], t) + rec['okey'][2:]  # (to the back of its queue)
                self.set_pending(rec, True)
            else:
                self.error(f'{w}: stopped for an unknown reason {why}')
        else:
            self.error(f'unknown event {ev}')

    def finish(self):
        self.check_instant()
        end = getattr(self, 'end', None)
        if end is None:
            self.error('the log has no end line (cut short?)', True)
            end = self.now
        if self.runs:
            self.error(f'{len(self.runs)} runs still hold devices at the end', True)
        sc = self.sc
        if self.room_seen is not None and sc is not None:
            for k in range(len(self.guar)):
                if self.ep_start[k] is not None:
                    self.close_episode(k, min(end, self.w1))
            self.refit()
            for rec in self.wl.values():
                for view in (0, 1):
                    if rec['fits'][view] is not None and rec['pending_since'] is not None:
                        self.check_wait(rec, view, end, 'at_end')
        if sc is not None:
            missing = [w['w'] for w in sc.workloads if not w.get('_seen')]
            if missing:
                self.error(f'{len(missing)} workload(s) of the scenario never arrive in the log, '
                           f'as {missing[:3]}', True)
        span = self.w1 - self.w0
        out = {
            'utilization_pct': 100.0 * self.alloc_int / (self.cap_gpu * span),
            'useful_utilization_pct': 100.0 * (self.alloc_int - self.lost_int) /
            (self.cap_gpu * span),
            'preemptions': self.evictions,
            'gpu_seconds_lost': self.lost_s,
            'window_s': span,
            'workloads': len(self.wl),
            'workloads_evicted': sum(1 for r in self.wl.values() if r['evictions'] > 0),
            'workloads_evicted_3plus': sum(1 for r in self.wl.values() if r['evictions'] >= 3),
            'evictions_max': max([r['evictions'] for r in self.wl.values()] or [0]),
            'elastic_shrinks': self.shrinks,
            'elastic_shrink_pods': self.shrink_pods,
            'elastic_growths': self.growths,
            'partial_admissions': self.partial,
            'teams': [],
        }
        if sc is not None:
            # Offered load: over the configured window (from 0), and over first-to-last arrival.
            out['offered_load'] = sc._clipped(sc.workloads, sc.window) / (sc.cap_gpu * sc.window)
            out['offered_load_unclipped'] = sum(sc.milli(w) * w['duration']
                                                for w in sc.workloads) / (sc.cap_gpu * sc.window)
            asked = 0.0
            for w in sc.workloads:
                asked += sc.milli(w) * max(0.0, min(self.w1, w['arrival'] + w['duration']) -
                                           max(self.w0, w['arrival']))
            out['offered_load_measured'] = asked / (sc.cap_gpu * span)
            out['trace_copies'] = sc.copies
            out['arrival_compression'] = sc.compression
            out['left_out'] = sc.left_out
            if sc.left_out_zero:
                out['left_out_zero_length'] = sc.left_out_zero
        sx = sxx = nx = 0
        unfinished = 0
        for i, t in enumerate(self.teams):
            waits = []
            by_size = [[] for _ in SIZES]
            count = infeasible = never = blocked = 0
            for rec in self.wl.values():
                if rec['team'] != i:
                    continue
                count += 1
                never += not rec.get('ever')
                blocked += bool(rec['blocked'])
                if rec['infeasible']:
                    infeasible += 1
                    continue  # (no scheduler could start it: no wait, as no share)
                wait = rec['wait']
                if rec['pending_since'] is not None:
                    wait += end - rec['pending_since']
                rec['total_wait'] = wait
                if rec['state'] != 'done':
                    unfinished += 1
                waits.append(wait)
                b = size_bucket(rec['milli'])
                if b is not None:
                    by_size[b].append(wait)
            share = self.share_int[i] / span
            fair = self.fair_int[i] / span
            if fair > 0:
                x = share / fair
                sx += x
                sxx += x * x
                nx += 1
            team = {'name': t['name'], 'workloads': count,
                    'wait_mean_s': sum(waits) / len(waits) if waits else 0.0,
                    'wait_p95_s': p95(waits) if waits else 0.0,
                    'avg_share': share, 'avg_fair_share': fair,
                    'never_admitted': never,
                    'preempted': self.preempted[i],
                    'preempted_by': dict(self.preempted_by[i]),
                    'gpu_seconds_lost': self.team_lost[i],
                    'waits_by_size': [{'gpus': SIZES[b], 'workloads': len(v),
                                       'wait_mean_s': sum(v) / len(v), 'wait_p95_s': p95(v)}
                                      for b, v in enumerate(by_size) if v]}
            if sc is not None:
                team['infeasible'] = infeasible
                team['policy_blocked'] = blocked
            if self.guar is not None:
                team['below_guarantee_pending_s'] = self.below_int[i]
                team['below_guarantee_any_pending_s'] = self.below_any_int[i]
                team['guarantee_gpus'] = self.guarantee_gpus[i]
            out['teams'].append(team)
        out['jain_index'] = sx * sx / (nx * sxx) if nx and sxx > 0 else 1.0
        out['unfinished'] = unfinished
        return out


def compare(mine, theirs, errors):
    """Every number recomputed against the replay's; a field the JSON lacks is an error too."""
    def close(key, a, b, tol=1e-6):
        if b is None:
            errors.append((None, f'{key}: missing from the replay\'s JSON (recomputed: {a})'))
        elif abs(a - b) > tol * max(1.0, abs(b)):
            errors.append((None, f'{key}: the replay says {b}, recomputed {a}'))

    for key, v in mine.items():
        if key in ('teams', 'unfinished'):
            continue
        tol = 0 if isinstance(v, int) else 1e-6
        close(key, v, theirs.get(key), tol)
    by_name = {t['name']: t for t in theirs.get('teams', [])}
    for t in mine['teams']:
        o = by_name.get(t['name'])
        if o is None:
            errors.append((None, f"team {t['name']} missing from the replay's JSON"))
            continue
        for key, v in t.items():
            if key == 'name':
                continue
            name = f"{t['name']}.{key}"
            if key == 'preempted_by':
                if v != o.get(key, {}):
                    errors.append((None, f"{name}: the replay says {o.get(key)}, recomputed {v}"))
            elif key == 'waits_by_size':
                ob = {b['gpus']: b for b in o.get(key, [])}
                if sorted(ob) != sorted(b['gpus'] for b in v):
                    errors.append((None, f"{name}: the replay's buckets {sorted(ob)}, "
                                         f"recomputed {[b['gpus'] for b in v]}"))
                for b in v:
                    for k in ('workloads', 'wait_mean_s', 'wait_p95_s'):
                        if b['gpus'] in ob:
                            close(f"{name}[{b['gpus']}].{k}", b[k], ob[b['gpus']].get(k),
                                  0 if k == 'workloads' else 1e-6)
            elif key == 'policy_blocked':
                close(name, v, o.get(key, 0), 0)  # (the JSON leaves out a zero)
            else:
                close(name, v, o.get(key), 0 if isinstance(v, int) else 1e-6)


def run_check(argv):
    opts = {'idle': None, 'scenario': None, 'no_scenario': False, 'trace_dir': None, 'load': None}
    args = []
    i = 1
    flags = {'--idle-every': 'idle', '--scenario': 'scenario', '--trace-dir': 'trace_dir',
             '--load': 'load'}
    while i < len(argv):
        a = argv[i]
        if a in flags and i + 1 < len(argv):
            opts[flags[a]] = argv[i + 1]
            i += 2
        elif a == '--no-scenario':
            opts['no_scenario'] = True
            i += 1
        else:
            args.append(a)
            i += 1
    if len(args) not in (1, 2):
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    idle_every = float(opts['idle']) if opts['idle'] is not None else None
    result = None
    if len(args) == 2:
        with open(args[1]) as f:
            result = json.load(f)
    with open(args[0]) as f:
        first = f.readline()
        if not first.strip():
            print(f'{args[0]}: empty', file=sys.stderr)
            return 1
        header = json.loads(first)
        if header.get('ev') != 'scenario':
            print(f'{args[0]}: the first line is not the scenario', file=sys.stderr)
            return 1
        # The scenario, rebuilt from its own files.
        sc = None
        notes = []
        path = None if opts['no_scenario'] else (
            opts['scenario'] or find_scenario(header.get('scenario'), args[0]))
        if path is None:
            why = '--no-scenario' if opts['no_scenario'] else \
                f"no scenario file named {header.get('scenario')!r} found (--scenario YAML " \
                f"names one)"
            notes.append(f"NOT RECOMPUTED: {why}: the fleet, the workloads' sizes, "
                         f"their infeasible flags and the weights are the log's; guarantees, "
                         f"below_guarantee_* and policy-blocked work are not checked")
        else:
            load = opts['load'] if opts['load'] is not None else \
                (result.get('load') if result is not None else None)
            try:
                sc = Scenario(path, opts['trace_dir'], load)
            except (OSError, KeyError, ValueError) as err:
                print(f'{path}: cannot rebuild the scenario: {err!r}', file=sys.stderr)
                return 1
            if sc.name != header.get('scenario'):
                print(f"{path} is scenario {sc.name!r}, the log's is {header.get('scenario')!r}",
                      file=sys.stderr)
                return 1
            notes.append(f'scenario {path} rebuilt ({sc.kind}, load {sc.load:g}, '
                         f'{len(sc.nodes)} nodes, {len(sc.workloads)} workloads)')
            notes.extend(sc.notes)
        c = Checker(header, sc)
        c.blocked_undetermined = 0
        c.idle_every = idle_every
        lines = 1
        for line in f:
            lines += 1
            c.event(json.loads(line))
    if sc is not None and abs(c.grace - sc.grace) > 1e-9:
        c.error(f'grace_s: the log says {c.grace}, the scenario {sc.grace}')
    if sc is not None and abs(header.get('interval_s', sc.interval) - sc.interval) > 1e-9:
        c.error(f"interval_s: the log says {header.get('interval_s')}, the scenario {sc.interval}")
    # The window is the replay's (first to last arrival): rechecked from the arrivals.
    arrivals = [t for t in c.arrival_times]
    if arrivals:
        first_t, last_t = min(arrivals), max(arrivals)
        if abs(first_t - c.w0) > 1e-6 or abs(max(first_t + 1, last_t) - c.w1) > 1e-6:
            c.error(f'the window [{c.w0}, {c.w1}] is not first to last arrival '
                    f'[{first_t}, {max(first_t + 1, last_t)}]')
    mine = c.finish()
    errors = c.errors
    if result is not None:
        compare(mine, result, errors)
    notes.extend(c.notes)
    if sc is not None:
        notes.append(f'infeasible flags: {len(c.wl) - c.infeasible_undetermined} of {len(c.wl)} '
                     f'recomputed, {len(c.infeasible_mismatch)} differ from the log')
        if c.infeasible_undetermined:
            notes.append(f'NOT RECOMPUTED: {c.infeasible_undetermined} infeasible flag(s) '
                         f'(required topology, or pods a greedy packing could not place '
                         f'together): the log\'s')
        if c.blocked_undetermined:
            notes.append(f'NOT RECOMPUTED: {c.blocked_undetermined} policy-blocked verdict(s) '
                         f'(pods a greedy packing could not place together on the team\'s '
                         f'slice): taken as admissible')
    if c.room_seen is not None and sc is not None and result is not None:
        ep = result.get('guarantee_episodes')
        for key, v in c.episodes.items():
            theirs = None if ep is None else ep.get(key)
            if theirs is None or abs(theirs - v) > 1e-6 * max(1.0, abs(v)):
                errors.append((None, f'guarantee_episodes.{key}: the replay says {theirs}, '
                                     f'recomputed {v}'))
        for view, key in ((0, 'guarantee_bound'), (1, 'guarantee_bound_alone')):
            theirs = result.get(key) or {}
            b = c.bound[view]
            n = theirs.get('exceptions', [])
            n = len(n) if isinstance(n, list) else n
            lo, hi = b['by_admission'] + b['at_end'], b['checked']
            if not lo <= theirs.get('checked', -1) <= hi:
                errors.append((None, f"{key}.checked: the replay says {theirs.get('checked')}, "
                                     f"the log allows [{lo}, {hi}]"))
            if n > b['over']:
                errors.append((None, f"{key}.exceptions: the replay says {n}, the log shows "
                                     f"at most {b['over']}"))
            if theirs.get('worst_excess_s', 0) > b['worst'] + 1e-6:
                errors.append((None, f"{key}.worst_excess_s: the replay says "
                                     f"{theirs.get('worst_excess_s')}, the log shows at most "
                                     f"{b['worst']}"))
        # Each listed exception: a wait of its workload the log shows, as long, past a bound
        # at least the one the log shows.
        for x in (result.get('guarantee_bound') or {}).get('exceptions', []) or []:
            rec = c.wl.get(x.get('workload'))
            if rec is None:
                errors.append((None, f"guarantee_bound: an exception of {x.get('workload')}, "
                                     f"which never arrived"))
                continue
            team = c.teams[rec['team']]['name']
            if team != x.get('team'):
                errors.append((None, f"guarantee_bound: {x['workload']} is {team}'s, not "
                                     f"{x.get('team')}'s"))
            if not any(abs(wait - x.get('wait_s', -1)) <= 1e-6 and
                       limit <= x.get('bound_s', 0) + 1e-6 for wait, limit in rec.get('waits', [])):
                errors.append((None, f"guarantee_bound: {x['workload']} waited {x.get('wait_s')} s "
                                     f"against a bound of {x.get('bound_s')} s; its waits in the "
                                     f"log (wait, bound at least): {rec.get('waits', [])[:5]}"))
    if c.room_seen is not None and sc is not None:
        for view, key in ((0, 'guarantee_bound'), (1, 'guarantee_bound_alone')):
            b = c.bound[view]
            line = (f"{key} from the log (the victims' minimum runtime only as far as evictions "
                    f"show it, no budget excuse; so at least the replay's): {b['checked']} waits "
                    f"({b['by_admission']} ended by a start, {b['at_end']} at the end, "
                    f"{b['by_stop']} by room lost past the bound), {b['over']} past the bound, "
                    f"worst excess {b['worst']:g} s")
            theirs = (result or {}).get(key)
            if theirs is not None:
                n = theirs.get('exceptions')
                n = len(n) if isinstance(n, list) else n
                line += f"; the replay: checked {theirs.get('checked')}, exceptions {n}"
            notes.append(line)
    for n in notes:
        print(n)
    if idle_every is not None:
        print(f'idle room: {c.idle_found} of {c.idle_checks} looks (one right after an admission '
              f'cycle, at most every {idle_every:g} s) found pending work that fit what nobody '
              f'held; {len(c.idle_passed)} workloads fit at two looks in a row (passed over), '
              f'by team: {dict(c.idle_by_team)}')
        for x in c.idle_examples:
            print(f'  {x}')
    for t, msg in errors:
        print(f'VIOLATION{"" if t is None else f" at t={t}"}: {msg}')
    if c.suppressed:
        print(f'... and {c.suppressed} more violation(s) of the log not listed')
    teams = ' '.join(f"{t['name']}:{t['wait_mean_s']:.1f}/{t['wait_p95_s']:.1f}"
                     for t in mine['teams'])
    shares = ' '.join(f"{t['name']}:{t['avg_share']:.4f}/{t['avg_fair_share']:.4f}"
                      for t in mine['teams'])
    below = ' '.join(f"{t['name']}:{t['below_guarantee_pending_s']:.0f}/"
                     f"{t['below_guarantee_any_pending_s']:.0f}"
                     for t in mine['teams'] if 'below_guarantee_pending_s' in t)
    summary = (f"events={lines} utilization_pct={mine['utilization_pct']:.4f} "
               f"useful_utilization_pct={mine['useful_utilization_pct']:.4f} "
               f"jain_index={mine['jain_index']:.4f} preemptions={mine['preemptions']} "
               f"gpu_seconds_lost={mine['gpu_seconds_lost']:.1f} unfinished={mine['unfinished']} "
               f"waits(mean/p95)={teams} share/fair={shares}" +
               (f' below_guarantee(pending/any)={below}' if below else ''))
    if errors:
        print(f'FAILED {len(errors) + c.suppressed} violation(s); {summary}')
        return 1
    print(f"OK {summary}{' (matches the replay JSON)' if result is not None else ''}")
    return 0


# ---- --self-test ----

def self_test(events, result, passthrough):
    """This checker on a good log and result, then on tampered copies of each."""
    me = os.path.abspath(__file__)
    failures = []
    # (The tampered copies lie in a directory of their own: the scenario named once, here.)
    if '--scenario' not in passthrough and '--no-scenario' not in passthrough:
        with open(events) as f:
            found = find_scenario(json.loads(f.readline()).get('scenario'), events)
        if found:
            passthrough = passthrough + ['--scenario', found]

    def run(log, res):
        p = subprocess.run([sys.executable, me] + passthrough + [log, res],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr

    def check(cond, what, text=''):
        print(('ok    ' if cond else 'FAIL  ') + what)
        if not cond:
            failures.append(what)
            print('      ' + text.strip()[-1500:].replace('\n', '\n      '))

    # The YAML subset against PyYAML, where that is installed; mt19937_64 against the standard's
    # check value.
    rng = MT64(5489)
    for _ in range(9999):
        rng.next()
    check(rng.next() == 9981545732273789042, 'mt19937_64: the 10000th draw of seed 5489')
    try:
        import yaml  # (only to check the small parser; never needed)
    except ImportError:
        yaml = None
    here = os.path.dirname(me)
    files = [os.path.join(d, f) for d in (os.path.join(here, '..', 'scenarios'),
                                          os.path.join(here, '..', 'tests', 'data', 'replay'))
             if os.path.isdir(d) for f in sorted(os.listdir(d)) if f.endswith('.yaml')]
    if yaml is None:
        print('skip  the YAML subset against PyYAML (not installed)')
    for f in files if yaml is not None else []:
        def norm(x):
            if isinstance(x, dict):
                return {str(k): norm(v) for k, v in x.items()}
            if isinstance(x, list):
                return [norm(v) for v in x]
            return None if x is None else str(x).lower() if isinstance(x, bool) else str(x)
        with open(f) as fh:
            text = fh.read()
        try:
            check(mini_yaml(text) == norm(yaml.safe_load(text)), f'{f}: read as PyYAML reads it')
        except ValueError as err:
            check(False, f'{f}: read as PyYAML reads it', repr(err))

    rc, text = run(events, result)
    check(rc == 0 and 'matches the replay JSON' in text and 'rebuilt' in text,
          'the good log and result pass, with the scenario rebuilt', text)
    if rc != 0:
        print(f'{len(failures)} failed')
        return 1
    with open(events) as f:
        good = [json.loads(line) for line in f]
    with open(result) as f:
        res = json.load(f)
    tmp = tempfile.mkdtemp(prefix='verify-replay-self-')

    def tampered_result(name, change, expect):
        r = copy.deepcopy(res)
        change(r)
        path = os.path.join(tmp, name + '.json')
        with open(path, 'w') as f:
            json.dump(r, f)
        rc, text = run(events, path)
        check(rc == 1 and expect in text and 'Traceback' not in text,
              f'{name}: caught ({expect!r})', text)

    def tampered_log(name, events_, expect):
        path = os.path.join(tmp, name + '.jsonl')
        with open(path, 'w') as f:
            for e in events_:
                f.write(json.dumps(e) + '\n')
        rc, text = run(path, result)
        check(rc == 1 and expect in text and 'Traceback' not in text,
              f'{name}: caught ({expect!r})', text)

    t0 = res['teams'][0]['name']
    busiest = max(range(len(res['teams'])),
                  key=lambda i: res['teams'][i].get('below_guarantee_pending_s', 0))
    tb = res['teams'][busiest]['name']

    def bump(key, by, team=None):
        def change(r):
            if team is None:
                r[key] += by
            else:
                t = next(x for x in r['teams'] if x['name'] == team)
                t[key] += by
        return change

    tampered_result('below-guarantee-longer', bump('below_guarantee_pending_s', 60, tb),
                    f'{tb}.below_guarantee_pending_s: the replay says')
    tampered_result('below-guarantee-shorter',
                    bump('below_guarantee_pending_s',
                         -min(60, res['teams'][busiest]['below_guarantee_pending_s']) or 1, tb),
                    f'{tb}.below_guarantee_pending_s: the replay says')
    tampered_result('below-any-pending', bump('below_guarantee_any_pending_s', 60, t0),
                    f'{t0}.below_guarantee_any_pending_s: the replay says')
    tampered_result('jain-index', bump('jain_index', -0.001),
                    'jain_index: the replay says')
    tampered_result('avg-share', bump('avg_share', 0.001, t0), f'{t0}.avg_share: the replay says')
    tampered_result('avg-fair-share', bump('avg_fair_share', -0.001, t0),
                    f'{t0}.avg_fair_share: the replay says')
    tampered_result('guarantee-gpus', bump('guarantee_gpus', 1, t0),
                    f'{t0}.guarantee_gpus: the replay says')
    tampered_result('infeasible-count', bump('infeasible', 1, t0),
                    f'{t0}.infeasible: the replay says')
    tampered_result('offered-load', bump('offered_load', 0.001),
                    'offered_load: the replay says')

    def bump_in(group, key, by):
        def change(r):
            r[group][key] += by
        return change
    tampered_result('episodes', bump_in('guarantee_episodes', 'episodes', 1),
                    'guarantee_episodes.episodes: the replay says')
    tampered_result('episode-exceptions', bump_in('guarantee_episodes', 'exceptions', -1)
                    if res['guarantee_episodes']['exceptions'] else
                    bump_in('guarantee_episodes', 'exceptions', 1),
                    'guarantee_episodes.exceptions: the replay says')
    tampered_result('bound-alone-exceptions',
                    bump_in('guarantee_bound_alone', 'exceptions', 10 ** 6),
                    'guarantee_bound_alone.exceptions: the replay says')
    def fake_exception(r):
        done = next(e for e in good if e['ev'] == 'place')
        r['guarantee_bound']['exceptions'].append(
            {'workload': done['w'], 'team': res['teams'][done['team']]['name'],
             'wait_s': 1e6, 'bound_s': 31.0, 'cause': 'tampered', 'kind': 'no room'})
    tampered_result('bound-exception-added', fake_exception, 'waited 1000000.0 s')
    tampered_result('bound-checked', bump_in('guarantee_bound', 'checked', 10 ** 6),
                    'guarantee_bound.checked: the replay says')
    tampered_result('bound-alone-checked', bump_in('guarantee_bound_alone', 'checked',
                                                   -res['guarantee_bound_alone']['checked'] - 1),
                    'guarantee_bound_alone.checked: the replay says')

    # The log: the end line dropped; a run's finish dropped (it holds its devices to the end,
    # and the shares and utilization grow); a fitting workload called infeasible; an arrival's
    # size changed; a weight changed; a node's cores changed.
    tampered_log('no-end', [e for e in good if e['ev'] != 'end'], 'no end line')
    k = next(i for i, e in enumerate(good) if e['ev'] == 'free' and e['why'] == 'finish')
    tampered_log('finish-dropped', good[:k] + good[k + 1:], 'still hold devices at the end')
    ev = copy.deepcopy(good)
    placed = {e['w'] for e in ev if e['ev'] == 'place'}
    arrive = next(e for e in ev if e['ev'] == 'arrive' and e['w'] in placed)
    arrive['infeasible'] = True
    tampered_log('fitting-called-infeasible', ev, f"{arrive['w']}: infeasible: the log says True")
    ev = copy.deepcopy(good)
    arrive = next(e for e in ev if e['ev'] == 'arrive')
    arrive['sets'][0]['cpu'] += 1000
    arrive['cpu'] += 1000 * arrive['sets'][0]['count']
    tampered_log('arrival-bigger', ev, f"{arrive['w']}: its arrive line is not the scenario's")
    ev = copy.deepcopy(good)
    ev[0]['teams'][0]['weight'] *= 2
    tampered_log('weight-doubled', ev, f'team {t0}: weight: the log says')
    if good[0]['policy'] == 'dedicated':
        ev = copy.deepcopy(good)
        owners = [t for t in ev[0]['teams'] if t['nodes']]
        if len(owners) >= 2:
            owners[0]['nodes'].append(owners[1]['nodes'].pop())
            tampered_log('dedicated-node-moved', ev,
                         f"team {owners[0]['name']}: its dedicated nodes in the log")
    ev = copy.deepcopy(good)
    ev[0]['nodes'][0]['cpu'] += 1000
    tampered_log('node-cores', ev, "the log's nodes are not the scenario's fleet")
    # A start delayed by a minute (its place line and everything of that run after it, shifted):
    # the waits, shares and the guarantee's measures move, and the result no longer matches.
    ev = copy.deepcopy(good)
    place = next(e for e in ev if e['ev'] == 'place' and e['t'] > ev[0]['window'][0] + 600 and
                 e['team'] == busiest)
    delayed = place['run']
    for e in ev:
        if e.get('run') == delayed and e['t'] >= place['t']:
            e['t'] += 60
    ev = [ev[0]] + sorted(ev[1:], key=lambda e: (e['t'], e['ev'] == 'end'))
    tampered_log('start-delayed', ev, 'the replay says')
    print(f'{len(failures)} failed')
    return 1 if failures else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == '--self-test':
        rest = argv[2:]
        paths = [a for a in rest if not a.startswith('--')]
        if len(paths) < 2:
            print('usage: verify_replay.py --self-test [options] EVENTS.jsonl RESULT.json',
                  file=sys.stderr)
            return 2
        events, result = paths[-2], paths[-1]
        passthrough = rest[:rest.index(events)] if events in rest else []
        return self_test(events, result, passthrough)
    return run_check(argv)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
