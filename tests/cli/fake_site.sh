#!/bin/sh
# A stand-in for `meridian start` in simulate's tests (simulate --site-program THIS): it reads the
# config file simulate wrote, then behaves as FAKE_SITE_MODE says, writing progress.jsonl and
# result.json in the format of the real daemon.
#   ok     site i evaluates 0.6i, 0.7i, 0.8i (0.60, 0.70, 0.80 for site-0), writes result.json
#          (its own model 0.8i, 100 ms per step, 3000 bytes sent), exits 0
#   fail   site-1 prints a reason and exits 3 once every other site is up; the others wait to be stopped
#   hang   every site waits to be stopped (SIGTERM ends it with 0)
#   target site i evaluates 0.6i, 0.7i, 0.8i like ok, then waits to be stopped; SIGTERM writes
#          result.json with "completed": false (as the daemon does for a stopped run) and exits 0
# Arguments: start --config FILE
# RUN_DIR/pid appears only once the site handles SIGTERM, and every file a reader may look at while the
# site runs appears whole (written aside, then renamed): a test that sees the pid may stop the site
# and expect it to say "stopping", and simulate may read result.json as soon as the site has exited.
set -eu
[ "$1" = start ] && [ "$2" = --config ] || { echo "fake site: unexpected arguments: $*" >&2; exit 2; }
config=$3
run_dir=$(sed -n 's/^run-dir = "\(.*\)"$/\1/p' "$config")
name=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$config")
algo=$(sed -n 's/^algo = "\(.*\)"$/\1/p' "$config")
index=${name#site-}
# Writes stdin to FILE whole: into a temporary file beside it, then renamed over it.
write_whole() {
  cat > "$1.tmp.$$"
  mv -f "$1.tmp.$$" "$1"
}
# result.json as the daemon writes it; $1 is "completed" (true or false).
write_result() {
  printf '{"site": "%s", "algo": "%s", "steps": 30, "epochs": 1, "train_seconds": 3.0, "seconds_per_step": 0.1, "test_accuracy": 0.%s, "bytes_sent": 3000, "bytes_received": 30, "rounds_abandoned": 0, "final_checkpoint": "%s/checkpoints/last.mrdn", "completed": %s}\n' \
    "$name" "$algo" "8$index" "$run_dir" "$1" | write_whole "$run_dir/result.json"
}
# Site i's three evaluations: 0.6i, 0.7i, 0.8i.
write_progress() {
  now=$(date +%s)
  for step in 1 2 3; do
    acc="0.$((5 + step))$index"
    echo "{\"time\": $((now + step)).5, \"site\": \"$name\", \"step\": $((step * 10)), \"epoch\": 0, \"train_loss\": 0.5, \"test_accuracy\": $acc, \"bytes_sent\": $((step * 1000)), \"bytes_received\": 10}" >> "$run_dir/progress.jsonl"
  done
}
if [ "${FAKE_SITE_MODE:-ok}" = target ]; then
  trap 'echo "fake site $name: stopping"; write_result false; exit 0' TERM
else
  trap 'echo "fake site $name: stopping"; exit 0' TERM
fi
echo $$ | write_whole "$run_dir/pid"
echo "fake site $name ($algo) in $run_dir"

case "${FAKE_SITE_MODE:-ok}" in
  ok)
    write_progress
    write_result true
    exit 0 ;;
  target) write_progress ;;
  fail)
    # Failing before the others have their SIGTERM handler would let simulate's stop kill them
    # silently (no "stopping" in their logs, perhaps no pid): wait for every other site's pid first.
    if [ "$name" = site-1 ]; then
      for other in "$run_dir"/../site-*; do
        while [ ! -s "$other/pid" ]; do sleep 0.05; done
      done
      echo "fake site: cannot read the dataset (on purpose)"; exit 3
    fi ;;
  hang) ;;
esac
while :; do sleep 0.1; done
