#!/bin/sh
# Puts moat's containerd shim on a node and registers the `moat` runtime
# with the node's containerd, changing only what is not already so:
#
# 1. the shim binary: copied to $SHIM_DEST when missing or different
#    (written beside it, then renamed, so containerd never starts half a
#    binary);
# 2. containerd's configuration: the `moat` runtime's table appended when
#    the file has none (any spelling of the table's header counts), in the
#    form the file's `version` asks for (1, 2: containerd 1.x; 3:
#    containerd 2.x); a file that does not exist is written with
#    $CONTAINERD_CONFIG_VERSION. The new file is checked by containerd
#    itself ($VALIDATE) before it replaces the old one, which is kept once
#    as config.toml.before-moat;
# 3. containerd restarted ($RESTART) only when the configuration changed.
#    Running pods keep running: their shims outlive containerd.
#
# A second run changes nothing and restarts nothing. It exits non-zero,
# saying why, when a step fails; the node's configuration is then as it
# was.
#
# In the DaemonSet of deploy/installer.yaml the node's root is mounted at
# $HOST_ROOT and the script runs in the host's PID namespace; every path
# below is the node's, under $HOST_ROOT. The tests run it against a
# scratch root with RESTART and VALIDATE of their own.
set -eu

HOST_ROOT=${HOST_ROOT:-/host}
SHIM_SOURCE=${SHIM_SOURCE:-/opt/moat/containerd-shim-moat-v1}
SHIM_DEST=${SHIM_DEST:-/usr/local/bin/containerd-shim-moat-v1}
CONTAINERD_CONFIG=${CONTAINERD_CONFIG:-/etc/containerd/config.toml}
CONTAINERD_CONFIG_VERSION=${CONTAINERD_CONFIG_VERSION:-2}
# Evaluated with $1 set to the new configuration's path as the node sees it.
VALIDATE=${VALIDATE:-'chroot "$HOST_ROOT" containerd --config "$1" config dump'}
RESTART=${RESTART:-'nsenter --target 1 --mount --uts --ipc --net --pid -- systemctl restart containerd'}

say() { printf 'moat-installer: %s\n' "$*"; }
fail() { say "error: $*" >&2; exit 1; }

shim="$HOST_ROOT$SHIM_DEST"
config="$HOST_ROOT$CONTAINERD_CONFIG"

# 1. The shim.
[ -f "$SHIM_SOURCE" ] || fail "no shim at $SHIM_SOURCE"
if [ -f "$shim" ] && cmp -s "$SHIM_SOURCE" "$shim"; then
  say "shim: $SHIM_DEST is up to date"
else
  mkdir -p "$(dirname "$shim")"
  cp "$SHIM_SOURCE" "$shim.moat-new" || fail "cannot write $SHIM_DEST"
  chmod 0755 "$shim.moat-new"
  mv -f "$shim.moat-new" "$shim"
  say "shim: installed $SHIM_DEST"
fi

# 2. containerd's configuration.
if [ -f "$config" ]; then
  # The file's own version: its `version = N` line, 1 when it has none.
  version=$(sed -n 's/^[[:space:]]*version[[:space:]]*=[[:space:]]*\([0-9]\{1,\}\).*/\1/p' "$config" | head -n 1)
  version=${version:-1}
else
  version=$CONTAINERD_CONFIG_VERSION
fi
case "$version" in
  1) table='[plugins.cri.containerd.runtimes.moat]' ;;
  2) table='[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.moat]' ;;
  3) table='[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.moat]' ;;
  *) fail "$CONTAINERD_CONFIG has version $version, which this installer does not know" ;;
esac

# Any header of a `moat` runtime table, quoted or not, spaced or not.
present() {
  [ -f "$config" ] && grep -Eq "^[[:space:]]*\[[[:space:]]*plugins\.([\"']?io\.containerd\.(grpc\.v1\.)?cri(\.v1\.runtime)?[\"']?|cri)\.containerd\.runtimes\.[\"']?moat[\"']?[[:space:]]*\]" "$config"
}

if present; then
  say "containerd: $CONTAINERD_CONFIG already has the moat runtime; nothing to do"
else
  new="$config.moat-new"
  mkdir -p "$(dirname "$config")"
  if [ -f "$config" ]; then
    cp -p "$config" "$new"
    [ -f "$config.before-moat" ] || cp -p "$config" "$config.before-moat"
  else
    printf 'version = %s\n' "$version" > "$new"
  fi
  {
    printf '\n# Added by moat-installer: pods with runtimeClassName moat.\n'
    printf '%s\n' "$table"
    printf '  runtime_type = "io.containerd.moat.v1"\n'
  } >> "$new"
  if ! checked=$(set -- "$CONTAINERD_CONFIG.moat-new"; eval "$VALIDATE" 2>&1); then
    rm -f "$new"
    fail "containerd refuses the new configuration, left as it was: $checked"
  fi
  case "$checked" in
    *runtimes.moat*) ;;
    *) rm -f "$new"; fail "containerd's configuration dump has no moat runtime; left as it was" ;;
  esac
  mv -f "$new" "$config"
  say "containerd: added the moat runtime to $CONTAINERD_CONFIG (version $version)"
  eval "$RESTART" || fail "restarting containerd failed ($RESTART)"
  say "containerd: restarted"
fi
