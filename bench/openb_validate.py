#!/usr/bin/env python3
"""Runs `fabrica sim openb` on every pod list of the trace that has reference rows and compares
the unallocated GPU % at 100% and 130% arrived with the FGD artifact's expected results.

Usage: bench/openb_validate.py FABRICA_BINARY [POLICY ...]   (default: bestfit fgd fabrica)
Prints a Markdown table: ours mean (sd) vs reference mean (sd) and the difference.
"""
import csv, json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, '..', '..', 'shared', 'traces', 'alibaba-gpu-2023')
REF_POLICY = {'random': '01-Random', 'dotprod': '02-DotProd', 'clustering': '03-GpuClustering',
              'packing': '04-GpuPacking', 'bestfit': '05-BestFit', 'fgd': '06-FGD'}


def reference():
    ref = {}
    path = os.path.join(TRACE, 'fgd-reference-results', 'analysis_allo_discrete.csv')
    for r in csv.DictReader(open(path)):
        key = (r['workload'].replace('openb_pod_list_', ''), r['sc_policy'])
        ref.setdefault(key, []).append((100 - float(r['100']), 100 - float(r['130'])))
    out = {}
    for key, rows in ref.items():
        u100 = [a for a, _ in rows]
        u130 = [b for _, b in rows]
        out[key] = (statistics.mean(u100), statistics.pstdev(u100),
                    statistics.mean(u130), statistics.pstdev(u130))
    return out


def main():
    if not os.path.isdir(TRACE):
        print('skipped: ../shared/traces/alibaba-gpu-2023 is absent')
        return 0
    binary = sys.argv[1]
    policies = sys.argv[2:] or ['bestfit', 'fgd', 'fabrica']
    ref = reference()
    variants = sorted({w for (w, _) in ref
                       if os.path.exists(os.path.join(TRACE, 'csv', f'openb_pod_list_{w}.csv'))})
    print('| trace | policy | ours @100 (sd) | ref @100 (sd) | diff | ours @130 (sd) | ref @130 (sd) | diff '
          '| offline @100 | ceiling @100 | FGD-to-ceiling gap closed |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    for w in variants:
        for p in policies:
            res = json.loads(subprocess.check_output([
                binary, 'sim', 'openb', '--nodes',
                os.path.join(TRACE, 'csv', 'openb_node_list_gpu_node.csv'), '--pods',
                os.path.join(TRACE, 'csv', f'openb_pod_list_{w}.csv'), '--policy', p,
                '--seeds', '42-51', '--json'] + (['--bounds'] if p == 'fabrica' else [])))
            rp = REF_POLICY.get(p, '06-FGD')
            r = ref[(w, rp)]
            o100, s100 = res['unallocated_pct_at_100'], res['unallocated_pct_sd_at_100']
            o130, s130 = res['unallocated_pct_at_130'], res['unallocated_pct_sd_at_130']
            label = p if p in REF_POLICY else f'{p} (vs FGD)'
            extra = '| | |'
            if 'ceiling_unallocated_pct_at_100' in res:
                off, ceil = res['offline_unallocated_pct_at_100'], res['ceiling_unallocated_pct_at_100']
                fgd = ref[(w, '06-FGD')][0]
                closed = (fgd - o100) / (fgd - ceil) * 100 if fgd > ceil else float('nan')
                extra = f'| {off:.2f} | {ceil:.2f} | {closed:.0f}% |'
            print(f'| {w} | {label} | {o100:.2f} ({s100:.2f}) | {r[0]:.2f} ({r[1]:.2f}) | {o100 - r[0]:+.2f} '
                  f'| {o130:.2f} ({s130:.2f}) | {r[2]:.2f} ({r[3]:.2f}) | {o130 - r[2]:+.2f} {extra}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
