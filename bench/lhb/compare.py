#!/usr/bin/env python3
"""compare.py: Galewatch's hourly quality flags against OpenOA's, turbine-hour by turbine-hour.

    python3 bench/lhb/compare.py GALEWATCH_EXPORT.csv OPENOA_FLAGS.csv [--map ws=Ws_avg,...]

GALEWATCH_EXPORT.csv: `galewatch export --format csv` of hourly intervals (use
--raw so turbine ids are written as stored). OPENOA_FLAGS.csv: the output of
./openoa-flags (turbine_id,hour,signal,rows,unresponsive,range).

Per mapped signal, two checks are compared on the turbine-hours where both
files have values for the signal:
    Galewatch `stuck`       vs OpenOA unresponsive > 0
    Galewatch `implausible` vs OpenOA range > 0
Turbine-hours with values in one file only are counted apart. Markdown on
stdout. Standard library only.
"""

import argparse
import csv
import os
import sys
from collections import defaultdict
from datetime import datetime, timezone

DEFAULT_MAP = ("wind_speed_ms=Ws_avg,power_kw=P_avg,pitch_deg=Ba_avg,nacelle_deg=Ya_avg,"
               "outdoor_temp_c=Ot_avg,wind_dir_deg=Wa_avg,vane_deg=Va_avg")
# (Galewatch flag, OpenOA column, how each side is named in the table)
CHECKS = [("stuck", "unresponsive", "stuck / unresponsive"),
          ("implausible", "range", "implausible / range")]


def utc_key(text):
    """An RFC 3339 instant -> canonical 'YYYY-MM-DDTHH:MM:SSZ', so both files' hours match."""
    t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if t.tzinfo is None:
        raise ValueError(f"timestamp without offset: {text!r}")
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_map(text):
    """'ws=Ws_avg,p=P_avg' -> {'ws': 'Ws_avg', 'p': 'P_avg'} (Galewatch name -> OpenOA column)."""
    pairs = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        gw, eq, oa = item.partition("=")
        if not eq or not gw or not oa:
            sys.exit(f"compare.py: bad --map item {item!r}: want GALEWATCH_SIGNAL=OPENOA_COLUMN")
        pairs[gw] = oa
    return pairs


def read_galewatch(path, signals):
    """{signal: {(turbine, hour): set of flags}} for hourly rows where the signal has values."""
    out = {s: {} for s in signals}
    skipped = 0
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        header = rows.fieldnames or []
        missing = [s for s in signals if f"{s}_n" not in header or f"{s}_flags" not in header]
        for s in missing:
            print(f"compare.py: {path} has no {s}_n/{s}_flags columns: skipping {s}", file=sys.stderr)
            del out[s]
        for row in rows:
            if row["interval_seconds"] != "3600":
                skipped += 1
                continue
            key = (row["turbine_id"], utc_key(row["interval_start"]))
            for s in out:
                if int(row[f"{s}_n"] or 0) > 0:
                    out[s][key] = set(filter(None, row[f"{s}_flags"].split(",")))
    if skipped:
        print(f"compare.py: skipped {skipped} Galewatch rows that are not hourly intervals", file=sys.stderr)
    return out


def read_openoa(path):
    """{column: {(turbine, hour): {'unresponsive': n, 'range': n}}} for rows with values."""
    out = defaultdict(dict)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if int(row["rows"]) > 0:
                out[row["signal"]][(row["turbine_id"], utc_key(row["hour"]))] = {
                    "unresponsive": int(row["unresponsive"]), "range": int(row["range"])}
    return out


def table(signal, column, gw, oa):
    """The Markdown section for one signal."""
    both_keys = gw.keys() & oa.keys()
    lines = [f"### {signal} / {column}", "",
             f"{len(both_keys)} turbine-hours in both files; "
             f"{len(gw.keys() - oa.keys())} in Galewatch's only, "
             f"{len(oa.keys() - gw.keys())} in OpenOA's only (not compared).", "",
             "| check (Galewatch / OpenOA) | both flag | Galewatch only | OpenOA only | neither | agreement |",
             "|---|---:|---:|---:|---:|---:|"]
    for gw_flag, oa_col, name in CHECKS:
        n = {"both": 0, "gw": 0, "oa": 0, "neither": 0}
        for key in both_keys:
            g, o = gw_flag in gw[key], oa[key][oa_col] > 0
            n["both" if g and o else "gw" if g else "oa" if o else "neither"] += 1
        agree = f"{(n['both'] + n['neither']) / len(both_keys):.1%}" if both_keys else "n/a"
        lines.append(f"| {name} | {n['both']} | {n['gw']} | {n['oa']} | {n['neither']} | {agree} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("galewatch", help="galewatch export --format csv (hourly intervals)")
    ap.add_argument("openoa", help="openoa-flags output")
    ap.add_argument("--map", default=DEFAULT_MAP, metavar="GW=OPENOA,...",
                    help=f"Galewatch signal = OpenOA column pairs (default: {DEFAULT_MAP})")
    args = ap.parse_args()

    mapping = parse_map(args.map)
    gw = read_galewatch(args.galewatch, list(mapping))
    oa = read_openoa(args.openoa)
    if not gw:
        sys.exit("compare.py: none of the mapped signals is in the Galewatch export")

    print(f"## Galewatch vs OpenOA 3.2 flags, per turbine-hour\n\n"
          f"Galewatch: `{os.path.basename(args.galewatch)}`; OpenOA: `{os.path.basename(args.openoa)}`.\n")
    for signal, column in mapping.items():
        if signal in gw:
            if column not in oa:
                print(f"compare.py: no {column} rows in {args.openoa}", file=sys.stderr)
            print(table(signal, column, gw[signal], oa.get(column, {})))


if __name__ == "__main__":
    main()
