# bench/lib.sh: what the benchmark scripts share, sourced by each (`. bench/lib.sh` from the
# repository's root, where every script runs). Functions only: nothing runs when it is sourced.

# A TCP port free on 127.0.0.1 now.
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# psql on the local server as postgres, unaligned and quiet: `psqlq -c "SQL" DATABASE`.
psqlq() { psql -Atqh 127.0.0.1 -U postgres "$@"; }

# The daemon a script runs: the release build, built first unless BENCH_BUILT is set; BENCH_BIN
# runs another build instead (an earlier commit's, to compare the two on one machine).
daemon_bin() {
  [ -n "${BENCH_BUILT:-}" ] || cargo build --release --quiet --bins >&2
  echo "${BENCH_BIN:-target/release/galewatch}"
}

# The wall clock in seconds, with nanoseconds.
now() { date +%s.%N; }

# Until FILE holds TEXT (a daemon's log saying it subscribed): SECONDS at most (10), then the
# file is printed and the call fails.
wait_ready() { # file text [seconds]
  for _ in $(seq $(( ${3:-10} * 20 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  cat "$1"; return 1
}

# Until something listens on 127.0.0.1:PORT (a broker just started): 10 s at most, else fails.
wait_port() { # port
  for _ in $(seq 200); do (echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done
  return 1
}

# Readings the daemons on these metrics ports have committed: their own counter, raised after
# each COMMIT. The scripts watch rows land through it and count the table once at the end:
# counting a table of a million rows twenty times a second took PostgreSQL's CPU from the very
# run being timed (bench/run's ratios were low by it, docs/performance.md).
inserted() { # port...
  local sum=0 p v
  for p in "$@"; do
    v=$(curl -s "http://127.0.0.1:$p/metrics" | awk '$1 == "galewatch_readings_inserted_total" {printf "%d", $2}')
    sum=$(( sum + ${v:-0} ))
  done
  echo "$sum"
}

# Until the daemons on these metrics ports have committed WANT readings in all, asking every
# BENCH_POLL_SECONDS (0.05; longer under callgrind, where each scrape is counted as the daemon's).
until_inserted() { # want port...
  local want=$1; shift
  while [ "$(inserted "$@")" != "$want" ]; do sleep "${BENCH_POLL_SECONDS:-0.05}"; done
}

# The number of rows in DATABASE's readings, or fails saying so when it is not WANT (once, after
# until_inserted: the counter and the table must agree).
check_rows() { # database want
  local got
  got=$(psqlq -c 'SELECT count(*) FROM readings' "$1")
  [ "$got" = "$2" ] || { echo "bench: $got rows in $1's readings, the daemons counted $2" >&2; return 1; }
}
