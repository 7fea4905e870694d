"""flags.py: OpenOA 3.2's own quality checks over La Haute Borne, counted per turbine-hour.

Reads la-haute-borne-data-2014-2015.csv (see ./fetch), and per turbine, with
rows in UTC time order, runs openoa.utils.filters.unresponsive_flag and
range_flag on seven signals. Writes CSV (stdout or --out):

    turbine_id,hour,signal,rows,unresponsive,range

hour = UTC hour start (RFC 3339, Z); rows = 10-min rows of that turbine in that
hour with a value for the signal; unresponsive / range = how many of those rows
OpenOA flags. A per-signal summary goes to stderr. Run it via ./openoa-flags,
which makes the venv holding openoa 3.2.
"""

import argparse
import sys

import pandas as pd
from openoa.utils.filters import range_flag, unresponsive_flag

# Inclusive [lower, upper] per column; range_flag flags values outside.
DEFAULT_RANGES = {
    "Ws_avg": (0, 40),  # wind speed, m/s
    "P_avg": (-100, 2100),  # active power, kW (Senvion MM82: 2,050 kW rated)
    "Ba_avg": (-10, 90),  # pitch angle, deg
    "Ya_avg": (0, 360),  # nacelle angle, deg
    "Ot_avg": (-40, 50),  # outdoor temperature, deg C
    "Wa_avg": (0, 360),  # absolute wind direction, deg
    "Va_avg": (-180, 180),  # vane position (wind relative to nacelle), deg
}
SIGNALS = list(DEFAULT_RANGES)


def parse_ranges(text):
    """'Ws_avg=0:40,P_avg=-100:2100' -> DEFAULT_RANGES with those replaced."""
    ranges = dict(DEFAULT_RANGES)
    for item in filter(None, text.split(",")):
        col, _, bounds = item.partition("=")
        lo, _, hi = bounds.partition(":")
        if col not in ranges or not lo or not hi:
            sys.exit(f"flags.py: bad --range item {item!r}: want COL=LOW:HIGH, COL one of {SIGNALS}")
        ranges[col] = (float(lo), float(hi))
    return ranges


def read_scada(path, clock):
    """The CSV as one frame: turbine_id, utc (tz-aware), the signals; time-ordered per turbine."""
    df = pd.read_csv(path, usecols=["Wind_turbine_name", "Date_time", *SIGNALS])
    df = df.rename(columns={"Wind_turbine_name": "turbine_id"})
    if clock == "labelled":
        # Each timestamp carries its offset (+01:00 winter, +02:00 summer): honour it.
        df["utc"] = pd.to_datetime(df["Date_time"], utc=True)
    else:
        # --clock cet: read every wall-clock time as UTC+01:00, ignoring the label.
        wall = pd.to_datetime(df["Date_time"].str.slice(0, 19))
        df["utc"] = (wall - pd.Timedelta(hours=1)).dt.tz_localize("UTC")
    # Stable sort keeps file order among equal instants; then keep the first of
    # each (turbine, instant), as OpenOA's examples/project_ENGIE.py does.
    df = df.sort_values(["turbine_id", "utc"], kind="stable")
    dup = df.duplicated(["turbine_id", "utc"], keep="first")
    if dup.any():
        print(f"flags.py: dropped {dup.sum()} rows repeating a (turbine, UTC instant) already seen "
              "(daylight-saving change); kept the first in file order", file=sys.stderr)
    return df[~dup].reset_index(drop=True)


def flag_turbine(g, threshold, ranges):
    """Per-hour counts for one turbine's time-ordered rows (long format)."""
    # OpenOA's functions, called as documented: a DataFrame plus the column list.
    # unresponsive_flag is positional: it compares each row with the previous
    # one, so the rows must be in time order; an empty value breaks a run.
    unresp = unresponsive_flag(g, threshold=threshold, col=SIGNALS)
    lo = [float(ranges[c][0]) for c in SIGNALS]
    hi = [float(ranges[c][1]) for c in SIGNALS]
    out_of_range = range_flag(g, lower=lo, upper=hi, col=SIGNALS)
    has = g[SIGNALS].notna()
    # range_flag also flags empty values (NaN fails lower <= x <= upper): count
    # only rows with a value, for both flags.
    counts = {
        "rows": has,
        "unresponsive": unresp & has,
        "range": out_of_range & has,
    }
    hour = g["utc"].dt.floor("h")
    parts = []
    for name, frame in counts.items():
        per_hour = frame.astype(int).groupby(hour).sum()  # hour x signal
        parts.append(per_hour.stack().rename(name))
    res = pd.concat(parts, axis=1).reset_index()
    res.columns = ["hour", "signal", *counts]
    res.insert(0, "turbine_id", g["turbine_id"].iat[0])
    return res


def summarise(res, out):
    """Per signal: hours with any unresponsive / range flag, of all turbine-hours."""
    print("signal   turbine-hours  with-data  unresponsive-hours  range-hours  "
          "unresponsive-rows  range-rows", file=out)
    for sig in SIGNALS:
        s = res[res["signal"] == sig]
        n, with_data = len(s), int((s["rows"] > 0).sum())
        hu, hr = int((s["unresponsive"] > 0).sum()), int((s["range"] > 0).sum())
        print(f"{sig:8} {n:13} {with_data:10} {hu:10} ({hu / n:6.2%}) {hr:6} ({hr / n:6.2%}) "
              f"{int(s['unresponsive'].sum()):12} {int(s['range'].sum()):11}", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="la-haute-borne-data-2014-2015.csv")
    ap.add_argument("--out", help="write the CSV here instead of stdout")
    ap.add_argument("--threshold", type=int, default=3,
                    help="unresponsive_flag threshold: flag runs of >= N identical consecutive "
                         "values (OpenOA's default: 3)")
    ap.add_argument("--range", default="", metavar="COL=LOW:HIGH,...",
                    help="override range_flag bounds (inclusive); defaults: "
                         + ", ".join(f"{c}={lo}:{hi}" for c, (lo, hi) in DEFAULT_RANGES.items()))
    ap.add_argument("--clock", choices=["labelled", "cet"], default="labelled",
                    help="labelled (default): convert each timestamp with its own offset; "
                         "cet: read all times as UTC+01:00 (see README)")
    args = ap.parse_args()
    if args.threshold < 2:
        ap.error("--threshold must be >= 2 (OpenOA flags every row at 1)")
    ranges = parse_ranges(args.range)

    df = read_scada(args.csv, args.clock)
    res = pd.concat([flag_turbine(g, args.threshold, ranges) for _, g in df.groupby("turbine_id")])
    res["signal"] = pd.Categorical(res["signal"], SIGNALS)  # output in SIGNALS order
    res = res.sort_values(["turbine_id", "hour", "signal"])
    res["hour"] = res["hour"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    res.to_csv(args.out or sys.stdout, index=False)

    print(f"flags.py: {len(df)} rows, {df['turbine_id'].nunique()} turbines, "
          f"{df['utc'].min():%Y-%m-%dT%H:%MZ} .. {df['utc'].max():%Y-%m-%dT%H:%MZ}; "
          f"threshold {args.threshold}; clock {args.clock}", file=sys.stderr)
    summarise(res, sys.stderr)


if __name__ == "__main__":
    main()
