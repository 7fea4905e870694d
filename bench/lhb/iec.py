"""IEC 61400-12-1's air-density normalisation of R80711 (La Haute Borne) in 2015 the OpenOA way,
to hold Galewatch's figures against (tests/la_haute_borne.rs prints Galewatch's).

    ~/.cache/galewatch/openoa-venv/bin/python bench/lhb/iec.py LHB_CSV GALEWATCH_HOURLY_EXPORT.csv

From the raw 10-minute CSV, pandas makes each UTC hour's means; Galewatch's hourly export says
which hours are clean for a curve (six readings, wind and power unflagged). OpenOA 3.2's own
`met_data_processing.compute_air_density` (K and Pa; dry air, as Galewatch without a humidity
signal, and OpenOA's default 50 % beside it) on the hour's mean temperature and
the standard atmosphere's pressure at 411 m, then `air_density_adjusted_wind_speed`, which
normalises to the mean density of the data given; the same with 1.225 kg/m3 by its formula. The
method of bins (0.5 m/s from 0) and the deviation from the MM82-shaped reference of the test.
"""
import sys

import numpy as np
import pandas as pd
from openoa.utils import met_data_processing as met

REFERENCE = [(3.0, 0.0), (4.0, 60.0), (5.0, 170.0), (6.0, 350.0), (7.0, 590.0), (8.0, 900.0),
             (9.0, 1260.0), (10.0, 1620.0), (11.0, 1900.0), (12.0, 2030.0), (13.0, 2050.0),
             (25.0, 2050.0)]


def deviation(wind, power):
    """Produced over expected, less 1, by the method of bins (bins outside the reference out)."""
    df = pd.DataFrame({"w": wind.values, "p": power.values})
    df["bin"] = np.floor(df.w / 0.5)
    bins = df.groupby("bin").agg(n=("p", "size"), w=("w", "mean"), p=("p", "mean"))
    xs, ys = zip(*REFERENCE)
    inside = bins[(bins.w >= xs[0]) & (bins.w <= xs[-1])]
    expected = (np.interp(inside.w, xs, ys) * inside.n).sum()
    return (inside.p * inside.n).sum() / expected - 1.0


def main(raw_csv, export_csv):
    raw = pd.read_csv(raw_csv)
    raw = raw[raw.Wind_turbine_name == "R80711"].copy()
    raw["t"] = pd.to_datetime(raw.Date_time, utc=True)
    # The first of each instant (the repeated spring hour's second rows are Galewatch's quarantine).
    raw = raw.drop_duplicates("t", keep="first").set_index("t").sort_index()
    hourly = raw[["Ws_avg", "P_avg", "Ot_avg"]].resample("1h").mean()
    # Each hour's turbulence intensity as pandas gives it, against the export's wind_speed_ms_ti.
    ti = raw.Ws_avg.resample("1h").std(ddof=0) / hourly.Ws_avg
    ex = pd.read_csv(export_csv, keep_default_na=False)
    ex = ex[ex.turbine_id == "R80711"].copy()
    ex["t"] = pd.to_datetime(ex.interval_start, utc=True)
    got = pd.to_numeric(ex.set_index("t").wind_speed_ms_ti, errors="coerce").dropna()
    both = got.index.intersection(ti.dropna().index)
    worst = (got[both] - ti[both]).abs().max()
    print(f"R80711, every hour: sigma/V in the export against pandas' std(ddof=0)/mean(): "
          f"{len(both)} hours, largest difference {worst:.3g}")
    clean = ex[(ex.readings == 6) & (ex.wind_speed_ms_flags == "") & (ex.power_kw_flags == "")]
    clean = clean[(clean.t >= "2015-01-01") & (clean.t < "2016-01-01")]
    h = hourly.loc[clean.t]
    h = h[(h.Ot_avg >= -80) & (h.Ot_avg <= 70) & (h.Ws_avg >= 0)]
    pressure = 101325.0 * (1.0 - 2.25577e-5 * 411.0) ** 5.25588
    kelvin, pa = h.Ot_avg + 273.15, pd.Series(pressure, index=h.index)
    # Dry air, as Galewatch takes it without a humidity signal (OpenOA assumes 50 % unless told).
    rho = met.compute_air_density(kelvin, pa, pd.Series(0.0, index=h.index))
    rho_half = met.compute_air_density(kelvin, pa)
    site = met.air_density_adjusted_wind_speed(h.Ws_avg, rho)
    sea = h.Ws_avg * np.power(rho / 1.225, 1.0 / 3.0)
    print(f"OpenOA 3.2 on R80711 2015: {len(h)} clean hours with a density, "
          f"{rho.min():.4f}-{rho.max():.4f} kg/m3, mean {rho.mean()!r}")
    print(f"  deviation normalised to the site's mean (air_density_adjusted_wind_speed): "
          f"{100 * deviation(site, h.P_avg):+.6f} %")
    print(f"  deviation normalised to 1.225 kg/m3:                                      "
          f"{100 * deviation(sea, h.P_avg):+.6f} %")
    # IEC 61400-12-1's R0 is 287.05, OpenOA's 287.058: a constant factor, which the site's mean
    # cancels and 1.225 does not.
    iec = h.Ws_avg * np.power(rho * 287.058 / 287.05 / 1.225, 1.0 / 3.0)
    print(f"  the same with IEC's R0 = 287.05 (Galewatch's density):                     "
          f"{100 * deviation(iec, h.P_avg):+.6f} %")
    half = met.air_density_adjusted_wind_speed(h.Ws_avg, rho_half)
    print(f"  the same with OpenOA's default 50 % humidity:                             "
          f"{100 * deviation(half, h.P_avg):+.6f} %")
    print(f"  deviation on raw winds:                                                    "
          f"{100 * deviation(h.Ws_avg, h.P_avg):+.6f} %")


if __name__ == "__main__":
    main(*sys.argv[1:3])
