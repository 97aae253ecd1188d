#!/bin/sh
# Entrypoint of the Meridian images. `start` (the default command) runs the daemon with the image's
# volumes as its key directory, roster and run directory, after checking that they are usable so that a
# missing mount is reported in one line instead of a stack of daemon errors. Any other command
# (status, peers, leave, keygen, init, eval, --help) is passed to `meridian` unchanged.
#
# Environment (defaults are the image's volumes):
#   MERIDIAN_KEY_DIR  this site's key pair            /etc/meridian/keys
#   MERIDIAN_ROSTER   the federation's roster file    /etc/meridian/roster/roster.txt
#   MERIDIAN_RUN_DIR  checkpoints and control socket  /var/lib/meridian
#   MERIDIAN_CONFIG   the site configuration          /etc/meridian/site.toml (used when it exists)
#
# Exit codes are meridian's (docs/operations.md, "Exit codes"): 78 when the operator must fix something
# (this script's checks, or the daemon's of the configuration and the data), 69 when the federation could
# not be reached, 70 for an internal error, 0 after the last round or a graceful stop.
set -eu

key_dir=${MERIDIAN_KEY_DIR:-/etc/meridian/keys}
roster=${MERIDIAN_ROSTER:-/etc/meridian/roster/roster.txt}
run_dir=${MERIDIAN_RUN_DIR:-/var/lib/meridian}
config=${MERIDIAN_CONFIG:-/etc/meridian/site.toml}

fail() {
  echo "meridian entrypoint: $*" >&2
  exit 78  # EX_CONFIG, meridian's user error code: the container is misconfigured; restarting will not help
}

if [ $# -eq 0 ]; then
  set -- start
fi
if [ "$1" != start ]; then
  exec meridian "$@"
fi
shift

insecure=0
for arg in "$@"; do
  [ "$arg" = --insecure ] && insecure=1
done

if [ "$insecure" = 0 ]; then
  [ -e "$key_dir/secret.key" ] ||
    fail "no key pair in $key_dir: mount this site's key directory there (docker/make-federation creates" \
         "one per demo site; for a real site run 'meridian keygen --out DIR' on the host, see docs/deploy.md)"
  [ -r "$key_dir/secret.key" ] ||
    fail "$key_dir/secret.key is not readable by uid $(id -u): run the container as the key's owner" \
         "(--user UID:GID) or chown the key directory to the image's user 10001"
  [ -e "$roster" ] ||
    fail "no roster at $roster: mount the federation's roster file there (NAME PUBLIC_KEY [ADDRESS] per line," \
         "see docs/deploy.md)"
  [ -r "$roster" ] || fail "$roster is not readable by uid $(id -u)"
fi
mkdir -p "$run_dir" 2>/dev/null || true
[ -w "$run_dir" ] ||
  fail "$run_dir is not writable by uid $(id -u): checkpoints and the control socket go there; mount a" \
       "volume that this user owns"

if [ -e "$config" ]; then
  set -- --config "$config" "$@"
fi
# exec: the daemon replaces this shell as PID 1, so `docker stop`'s SIGTERM reaches it (graceful leave).
exec meridian start --key-dir "$key_dir" --roster "$roster" --run-dir "$run_dir" "$@"
