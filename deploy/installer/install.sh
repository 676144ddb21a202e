#!/bin/sh
# Puts moat's containerd shim on a node and registers the `moat` runtime
# with the node's containerd (MODE=install, the default), or takes both
# away again (MODE=uninstall), changing only what is not already so.
#
# The node's containerd layout is found (LAYOUT=auto) or named:
#
#   stock     /etc/containerd/config.toml, edited in place; unit containerd
#   k3s       /var/lib/rancher/k3s/agent/etc/containerd/: k3s writes
#             config.toml itself at each start, so the table goes into
#             its template (config.toml.tmpl, or config-v3.toml.tmpl for
#             k3s's containerd 2.x), made from k3s's own base template
#             when there is none; unit k3s or k3s-agent
#   rke2      the same under /var/lib/rancher/rke2/; unit rke2-server or
#             rke2-agent
#   microk8s  /var/snap/microk8s/current/args/containerd-template.toml;
#             restarted with `snap restart microk8s.daemon-containerd`
#
# A node with none of these is refused, by name, with what to set.
#
# Install:
# 1. the shim: copied to $SHIM_DEST when missing or different (written
#    beside it, then renamed, so containerd never starts half a binary);
# 2. the configuration: the `moat` runtime's table (its runtime_path the
#    shim's, so containerd's PATH does not matter) appended when the file
#    has none, in the form the file's `version` asks for (1, 2: containerd
#    1.x; 3: containerd 2.x). The result is checked by the node's own
#    containerd before it replaces the file; the file as it was is kept
#    once as <file>.before-moat;
# 3. containerd restarted, only when the configuration changed, and one
#    node at a time: the restart holds a Lease (kube-system/$LOCK_NAME)
#    that no other node's installer can take until it is released or
#    older than $LOCK_STALE seconds. Running pods keep running: their
#    shims outlive containerd;
# 4. the node labelled $NODE_LABEL=true, which deploy/runtimeclass.yaml
#    selects: moat pods are scheduled only where the runtime is.
#
# Uninstall takes the label off first (no new moat pod is scheduled
# here), then the table the installer added (the file is then what it was
# before, unless it was changed since: those changes stay), restarts
# containerd as above, and removes the shim last. A table of the moat
# runtime the installer did not add is left, and said so.
#
# A second run changes nothing and restarts nothing. Each step that fails
# exits non-zero saying why, the configuration as it was.
#
# In the DaemonSet of deploy/installer.yaml the node's root is mounted at
# $HOST_ROOT, the script runs in the host's PID namespace, and NODE_NAME
# comes from the pod's spec. Without NODE_NAME (run by hand on a node)
# there is no lock and no label. The tests run it against scratch roots
# laid out as each distribution does, with RESTART, VALIDATE and the API
# of their own.
set -eu

MODE=${MODE:-install}
HOST_ROOT=${HOST_ROOT:-/host}
LAYOUT=${LAYOUT:-auto}
SHIM_SOURCE=${SHIM_SOURCE:-/opt/moat/containerd-shim-moat-v1}
SHIM_DEST=${SHIM_DEST:-/usr/local/bin/containerd-shim-moat-v1}
CONTAINERD_CONFIG_VERSION=${CONTAINERD_CONFIG_VERSION:-2}
NODE_NAME=${NODE_NAME:-}
NODE_LABEL=${NODE_LABEL:-moat.dev/runtime}
LOCK_NAME=${LOCK_NAME:-moat-installer-restart}
LOCK_NAMESPACE=${LOCK_NAMESPACE:-kube-system}
# A restart takes seconds; a lock this old was left by an installer that
# died holding it.
LOCK_STALE=${LOCK_STALE:-300}
# Longest wait for the other nodes' restarts: a 200-node cluster at a few
# seconds each, with room.
LOCK_WAIT=${LOCK_WAIT:-1800}
LOCK_POLL=${LOCK_POLL:-5}
SA=/var/run/secrets/kubernetes.io/serviceaccount
API=${API:-https://${KUBERNETES_SERVICE_HOST:-kubernetes.default.svc}:${KUBERNETES_SERVICE_PORT:-443}}
API_TOKEN_FILE=${API_TOKEN_FILE:-$SA/token}
API_CA_FILE=${API_CA_FILE:-$SA/ca.crt}

say() { printf 'moat-installer: %s\n' "$*"; }
fail() { say "error: $*" >&2; exit 1; }

case "$MODE" in
  install | uninstall) ;;
  *) fail "MODE=$MODE: expected install or uninstall" ;;
esac

# --- The node's layout ------------------------------------------------

# The first of the unit files named that the node has (without .service).
unit_of() {
  for u in "$@"; do
    for d in /etc/systemd/system /usr/local/lib/systemd/system /usr/lib/systemd/system /lib/systemd/system; do
      if [ -f "$HOST_ROOT$d/$u.service" ]; then
        echo "$u"
        return 0
      fi
    done
  done
  return 1
}

rancher() { # k3s | rke2
  dir=/var/lib/rancher/$1/agent/etc/containerd
  rendered=$dir/config.toml
  rendered_version=$(file_version "$HOST_ROOT$rendered" 2)
  if [ "$rendered_version" = 3 ]; then
    CONFIG=$dir/config-v3.toml.tmpl
  else
    CONFIG=$dir/config.toml.tmpl
  fi
  TEMPLATE_BASE='{{ template "base" . }}'
  if [ "$1" = k3s ]; then
    units="k3s k3s-agent"
    CONTAINERD_BIN=/var/lib/rancher/k3s/data/current/bin/containerd
  else
    units="rke2-server rke2-agent"
    CONTAINERD_BIN=/var/lib/rancher/rke2/bin/containerd
  fi
  # shellcheck disable=SC2086
  unit=$(unit_of $units) || fail "$1: none of the units $units is on the node; set RESTART to the command that restarts its containerd"
  DEFAULT_RESTART="nsenter --target 1 --mount --uts --ipc --net --pid -- systemctl restart $unit"
}

# `version = N` of file $1, $2 when the file has no such line.
file_version() {
  if [ -f "$1" ]; then
    v=$(sed -n 's/^[[:space:]]*version[[:space:]]*=[[:space:]]*\([0-9]\{1,\}\).*/\1/p' "$1" | head -n 1)
    echo "${v:-1}"
  else
    echo "$2"
  fi
}

if [ "$LAYOUT" = auto ]; then
  if [ -f "$HOST_ROOT/var/lib/rancher/k3s/agent/etc/containerd/config.toml" ]; then
    LAYOUT=k3s
  elif [ -f "$HOST_ROOT/var/lib/rancher/rke2/agent/etc/containerd/config.toml" ]; then
    LAYOUT=rke2
  elif [ -f "$HOST_ROOT/var/snap/microk8s/current/args/containerd-template.toml" ]; then
    LAYOUT=microk8s
  elif [ -d "$HOST_ROOT/etc/containerd" ] || unit_of containerd >/dev/null; then
    LAYOUT=stock
  else
    fail "no containerd layout this installer knows is on the node (looked for /etc/containerd, k3s's and RKE2's /var/lib/rancher/*/agent/etc/containerd/config.toml, microk8s's /var/snap/microk8s/current/args/containerd-template.toml); set LAYOUT=stock with CONTAINERD_CONFIG, VALIDATE and RESTART for another"
  fi
fi

TEMPLATE_BASE=
CONTAINERD_BIN=containerd
case "$LAYOUT" in
  stock)
    CONFIG=${CONTAINERD_CONFIG:-/etc/containerd/config.toml}
    DEFAULT_RESTART='nsenter --target 1 --mount --uts --ipc --net --pid -- systemctl restart containerd'
    ;;
  k3s | rke2) rancher "$LAYOUT" ;;
  microk8s)
    CONFIG=/var/snap/microk8s/current/args/containerd-template.toml
    CONTAINERD_BIN=/snap/microk8s/current/bin/containerd
    DEFAULT_RESTART='nsenter --target 1 --mount --uts --ipc --net --pid -- snap restart microk8s.daemon-containerd'
    ;;
  *) fail "LAYOUT=$LAYOUT: expected auto, stock, k3s, rke2 or microk8s" ;;
esac
# Evaluated with $1 set to the file to check, as the node sees it.
VALIDATE=${VALIDATE:-"chroot \"\$HOST_ROOT\" $CONTAINERD_BIN --config \"\$1\" config dump"}
RESTART=${RESTART:-$DEFAULT_RESTART}
say "$MODE on a $LAYOUT node: $CONFIG"

shim="$HOST_ROOT$SHIM_DEST"
config="$HOST_ROOT$CONFIG"

# --- The API: the lock and the label ------------------------------------

# api METHOD PATH [BODY [CONTENT-TYPE]]: the response body; the HTTP status
# in $status.
api() {
  set -- "$1" "$2" "${3:-}" "${4:-application/json}"
  auth=
  [ -r "$API_TOKEN_FILE" ] && auth="Authorization: Bearer $(cat "$API_TOKEN_FILE")"
  ca=
  [ -r "$API_CA_FILE" ] && ca="--cacert $API_CA_FILE"
  out=$(mktemp)
  # shellcheck disable=SC2086
  status=$(curl -sS $ca -o "$out" -w '%{http_code}' -X "$1" ${auth:+-H "$auth"} \
    -H "Content-Type: $4" ${3:+--data "$3"} "$API$2") || status=000
  cat "$out"
  rm -f "$out"
}

now() { date -u +%Y-%m-%dT%H:%M:%S.000000Z; }

leases=/apis/coordination.k8s.io/v1/namespaces/$LOCK_NAMESPACE/leases

# Takes the restart lock, waiting while another node holds it.
lock() {
  [ -n "$NODE_NAME" ] || return 0
  for tool in curl jq; do
    command -v "$tool" >/dev/null 2>&1 || fail "lock: $tool is needed to take the restart lock"
  done
  waited=0
  while :; do
    body=$(printf '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"%s"},"spec":{"holderIdentity":"%s","leaseDurationSeconds":%s,"acquireTime":"%s","renewTime":"%s"}}' \
      "$LOCK_NAME" "$NODE_NAME" "$LOCK_STALE" "$(now)" "$(now)")
    api POST "$leases" "$body" >/dev/null
    case "$status" in
      201) say "lock: $LOCK_NAMESPACE/$LOCK_NAME taken"; return 0 ;;
      409) ;;
      *) fail "lock: the API answered $status to taking $LOCK_NAMESPACE/$LOCK_NAME" ;;
    esac
    held=$(api GET "$leases/$LOCK_NAME")
    holder=$(printf '%s' "$held" | jq -r '.spec.holderIdentity // ""' 2>/dev/null) || holder=
    renewed=$(printf '%s' "$held" | jq -r '.spec.renewTime // ""' 2>/dev/null) || renewed=
    version=$(printf '%s' "$held" | jq -r '.metadata.resourceVersion // ""' 2>/dev/null) || version=
    age=$(($(date -u +%s) - $(date -u -d "${renewed:-1970-01-01T00:00:00Z}" +%s 2>/dev/null || echo 0)))
    if [ -z "$version" ]; then
      # Not read (the API failed, or the Lease went meanwhile): nothing
      # to take over; ask again.
      holder="a holder the API did not name"
      age="an unknown number of"
    elif [ "$holder" = "$NODE_NAME" ] || [ "$age" -ge "$LOCK_STALE" ]; then
      # Left by this node's own earlier run, or by one that died: taken
      # over only as it was read (resourceVersion), so that two nodes
      # cannot both take it over.
      say "lock: taking over $LOCK_NAME from ${holder:-nobody} (renewed ${age} s ago)"
      api DELETE "$leases/$LOCK_NAME" "{\"preconditions\":{\"resourceVersion\":\"$version\"}}" >/dev/null
      continue
    fi
    [ "$waited" -lt "$LOCK_WAIT" ] || fail "lock: $holder has held $LOCK_NAME for ${age} s; waited $waited s (LOCK_WAIT) for it"
    [ "$waited" -eq 0 ] && say "lock: $holder is restarting its containerd; waiting"
    sleep "$LOCK_POLL"
    waited=$((waited + LOCK_POLL))
  done
}

unlock() {
  [ -n "$NODE_NAME" ] || return 0
  api DELETE "$leases/$LOCK_NAME" >/dev/null
  case "$status" in
    200 | 202 | 404) say "lock: released" ;;
    *) say "lock: the API answered $status to releasing $LOCK_NAME; it goes stale in $LOCK_STALE s" ;;
  esac
}

# label true | remove
label() {
  [ -n "$NODE_NAME" ] || { say "label: no NODE_NAME, the node's label is left to you"; return 0; }
  if [ "$1" = true ]; then value='"true"'; else value=null; fi
  api PATCH "/api/v1/nodes/$NODE_NAME" "{\"metadata\":{\"labels\":{\"$NODE_LABEL\":$value}}}" \
    application/merge-patch+json >/dev/null
  case "$status" in
    200) say "label: $NODE_NAME $NODE_LABEL $([ "$1" = true ] && echo set || echo removed)" ;;
    *) fail "label: the API answered $status to labelling $NODE_NAME" ;;
  esac
}

restart() {
  lock
  restarted=yes
  eval "$RESTART" || restarted=no
  unlock
  [ "$restarted" = yes ] || fail "restarting containerd failed ($RESTART)"
  say "containerd: restarted"
}

# --- The configuration ----------------------------------------------------

MARK='# Added by moat-installer: pods with runtimeClassName moat.'

# Any header of a `moat` runtime table, quoted or not, spaced or not.
present() {
  [ -f "$config" ] && grep -Eq "^[[:space:]]*\[[[:space:]]*plugins\.([\"']?io\.containerd\.(grpc\.v1\.)?cri(\.v1\.runtime)?[\"']?|cri)\.containerd\.runtimes\.[\"']?moat[\"']?[[:space:]]*\]" "$config"
}

# Checks file $1 (a path on the node, under $HOST_ROOT) with the node's
# containerd; fails, removing $2, when it refuses it.
validate() {
  if ! checked=$(set -- "$1"; eval "$VALIDATE" 2>&1); then
    rm -f "$2"
    fail "containerd refuses the new configuration, left as it was: $checked"
  fi
  case "$checked" in
    *runtimes.moat*) ;;
    *) rm -f "$2"; fail "containerd's configuration dump has no moat runtime; left as it was" ;;
  esac
}

# Sets changed=yes when it changed the file.
install_config() {
  changed=no
  if present; then
    say "containerd: $CONFIG already has the moat runtime; nothing to do"
    return 0
  fi
  if [ -n "$TEMPLATE_BASE" ]; then
    version=$rendered_version
  else
    version=$(file_version "$config" "$CONTAINERD_CONFIG_VERSION")
  fi
  case "$version" in
    1) table='[plugins.cri.containerd.runtimes.moat]' ;;
    2) table='[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.moat]' ;;
    3) table='[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.moat]' ;;
    *) fail "$CONFIG has version $version, which this installer does not know" ;;
  esac
  block=$(printf '\n%s\n%s\n  runtime_type = "io.containerd.moat.v1"\n  runtime_path = "%s"\n' \
    "$MARK" "$table" "$SHIM_DEST")
  new="$config.moat-new"
  mkdir -p "$(dirname "$config")"
  if [ -f "$config" ]; then
    cp -p "$config" "$new"
    [ -f "$config.before-moat" ] || cp -p "$config" "$config.before-moat"
  elif [ -n "$TEMPLATE_BASE" ]; then
    printf '%s\n' "$TEMPLATE_BASE" > "$new"
    : > "$config.moat-created"
  else
    printf 'version = %s\n' "$version" > "$new"
    : > "$config.moat-created"
  fi
  printf '%s\n' "$block" >> "$new"
  if [ -n "$TEMPLATE_BASE" ]; then
    # A template is not TOML until k3s or RKE2 renders it: what is checked
    # is the configuration it renders now with the table added.
    check="$HOST_ROOT$rendered.moat-check"
    cp -p "$HOST_ROOT$rendered" "$check"
    printf '%s\n' "$block" >> "$check"
    validate "$rendered.moat-check" "$new"
    rm -f "$check"
  else
    validate "$CONFIG.moat-new" "$new"
  fi
  mv -f "$new" "$config"
  changed=yes
  say "containerd: added the moat runtime to $CONFIG (version $version)"
}

# Sets changed=yes when it changed the file.
uninstall_config() {
  changed=no
  if [ ! -f "$config" ] || ! grep -qF "$MARK" "$config"; then
    if present; then
      say "containerd: $CONFIG has a moat runtime this installer did not add; left as it is"
    else
      say "containerd: $CONFIG has no moat runtime; nothing to do"
    fi
    return 0
  fi
  new="$config.moat-new"
  # The block the installer added: the blank line before the mark, the
  # mark, the header and its two keys.
  awk -v mark="$MARK" '
    { line[NR] = $0 }
    END {
      n = 0
      for (i = 1; i <= NR; i++) {
        if (line[i] == mark) {
          if (n > 0 && kept[n] == "") n--
          i += 3
          continue
        }
        kept[++n] = line[i]
      }
      for (i = 1; i <= n; i++) print kept[i]
    }' "$config" > "$new"
  if [ -f "$config.moat-created" ]; then
    rm -f "$new" "$config" "$config.moat-created"
    say "containerd: removed $CONFIG, which the installer had written"
  else
    if [ -f "$config.before-moat" ] && cmp -s "$new" "$config.before-moat"; then
      say "containerd: $CONFIG is again as it was before moat"
    else
      say "containerd: took the moat runtime out of $CONFIG (it changed since; the changes stay)"
    fi
    mv -f "$new" "$config"
  fi
  rm -f "$config.before-moat"
  changed=yes
}

# --- The steps --------------------------------------------------------------

if [ "$MODE" = install ]; then
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
  install_config
  [ "$changed" = no ] || restart
  label true
else
  label remove
  uninstall_config
  [ "$changed" = no ] || restart
  if [ -f "$shim" ]; then
    rm -f "$shim"
    say "shim: removed $SHIM_DEST (running moat pods keep theirs until they end)"
  fi
fi
say "done"
