#!/usr/bin/env bash
# Builds the components made by other projects' toolchains that the test
# suite runs under moat:
#
#   py-client.wasm   componentize-py, wasi:cli/run 0.2: `tcp HOST PORT MSG`
#                    (asyncio), `http URL` (wasi:http outgoing-handler)
#   py-p3.wasm       componentize-py, wasi:cli/run 0.3: `tcp HOST PORT MSG`
#   py-handler.wasm  componentize-py, wasi:http 0.2 proxy
#   py-isolation.wasm  componentize-py, wasi:http 0.2 proxy: the isolation tests'
#   py-json.wasm     componentize-py, wasi:http 0.2 proxy: the bench's Python row
#   js-fetch.wasm    componentize-js (StarlingMonkey), fetch(URL)
#   js-net.wasm      jco, QuickJS backend, node:net client
#   js-isolation.wasm  componentize-js, wasi:http 0.2 proxy: the isolation tests'
#   js-hello.wasm    componentize-js, wasi:http 0.2 proxy: the bench's JavaScript row
#   js-proxy-hello.wasm  the same hello in the whole wasi:http/proxy world
#
# Usage: examples/foreign/build.sh OUT_DIR
#        examples/foreign/build.sh OUT_DIR --handler SOURCE
#
# With --handler, only your own wasi:http 0.2 handler is built, into
# OUT_DIR/NAME.wasm: SOURCE is a JavaScript file (NAME.js, a `fetch` event
# listener, componentize-js) or a directory holding app.py (NAME/, a
# `WitWorld`'s `IncomingHandler` class, componentize-py), written as
# js/hello.js and python/handler/app.py are.
#
# Needs only python3 (with pip) and node (with npm). The pinned toolchains
# (python/requirements.txt, js/toolchain/package*.json) are installed into
# $FOREIGN_TOOLS (default OUT_DIR/tools) when missing or when a pin
# changed. A component is rebuilt only when its inputs (sources, WIT, the
# pins, this script) changed since the build recorded in NAME.wasm.stamp.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
usage="usage: $0 OUT_DIR [--handler FILE.js|DIR_WITH_APP_PY]"
own=
case $# in
    1) ;;
    3) [ "$2" = --handler ] || { echo "$usage" >&2; exit 2; }
       [ -e "$3" ] || { echo "foreign/build.sh: no such handler source: $3" >&2; exit 2; }
       own=$(cd "$(dirname "$3")" && pwd)/$(basename "$3") ;;
    *) echo "$usage" >&2; exit 2 ;;
esac
mkdir -p "$1"
out=$(cd "$1" && pwd)
tools=${FOREIGN_TOOLS:-$out/tools}
mkdir -p "$tools"
tools=$(cd "$tools" && pwd)

die() { echo "foreign/build.sh: $*" >&2; exit 1; }
hash_of() { (cd "$here" && sha256sum "$@" | sha256sum | cut -c1-64); }

# --- toolchains -------------------------------------------------------------

py=$tools/py
want=$(hash_of python/requirements.txt)
if [ "$(cat "$py/.pins" 2>/dev/null)" != "$want" ]; then
    echo "installing componentize-py into $py"
    rm -rf "$py"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
        --target "$py" -r "$here/python/requirements.txt" \
        || die "cannot install componentize-py with python3 -m pip (see python/requirements.txt)"
    echo "$want" >"$py/.pins"
fi
# pip --target makes no usable entry point; call the module's own.
componentize_py() {
    PYTHONPATH=$py python3 -c 'import sys; from componentize_py import script; sys.argv[0] = "componentize-py"; sys.exit(script())' "$@"
}

js=$tools/npm
want=$(hash_of js/toolchain/package.json js/toolchain/package-lock.json)
if [ "$(cat "$js/.pins" 2>/dev/null)" != "$want" ]; then
    echo "installing jco and componentize-js into $js"
    rm -rf "$js"
    mkdir -p "$js"
    cp "$here/js/toolchain/package.json" "$here/js/toolchain/package-lock.json" "$js/"
    (cd "$js" && npm ci --no-audit --no-fund --loglevel=error) \
        || die "cannot install the npm toolchain with npm ci (see js/toolchain/package.json)"
    echo "$want" >"$js/.pins"
fi
jco=$js/node_modules/.bin/jco
componentize_js=$js/node_modules/.bin/componentize-js

# --- WIT --------------------------------------------------------------------
# Our worlds, with the WASI packages they use copied in from the pinned
# jco (copied, not linked: jco's own wasm tools see no symlink targets).

wasi_wit=$js/node_modules/@bytecodealliance/jco/lib/wit/builtin
[ -d "$wasi_wit/0.2.12" ] && [ -d "$wasi_wit/0.3.0" ] || die "no WASI WIT in $wasi_wit"
stage_wit() { # DIR SOURCE_WIT VERSION...
    local dir=$1 src=$2 version package
    shift 2
    rm -rf "$dir"
    mkdir -p "$dir/deps"
    cp "$src" "$dir/"
    for version in "$@"; do
        for package in "$wasi_wit/$version"/wasi-*; do
            cp -r "$package" "$dir/deps/$(basename "$package")-$version"
        done
    done
}
stage_wit "$out/wit/py" "$here/python/wit/worlds.wit" 0.2.12 0.3.0
stage_wit "$out/wit/js" "$here/js/wit/worlds.wit" 0.2.12 0.3.0
# The pinned jco carries no wasi:http at 0.2.10: its 0.2.12 packages, whose
# interfaces are the same, are laid down under 0.2.10.
stage_wit "$out/wit/js-handler" "$here/js/wit/handler.wit" 0.2.12
for package in "$out/wit/js-handler/deps"/*-0.2.12; do
    sed -i 's/@0\.2\.12\b/@0.2.10/g' "$package"/*.wit
    mv "$package" "${package%-0.2.12}-0.2.10"
done

# --- components -------------------------------------------------------------

# build NAME INPUT... -- COMMAND...: COMMAND writes $tmp (set here, so
# COMMAND must read it when it runs), which becomes NAME.wasm.
build() {
    local name=$1 inputs=() stamp start
    shift
    while [ "$1" != -- ]; do inputs+=("$1"); shift; done
    shift
    stamp=$(hash_of "${inputs[@]}" build.sh python/requirements.txt js/toolchain/package-lock.json)
    if [ -f "$out/$name.wasm" ] && [ "$(cat "$out/$name.wasm.stamp" 2>/dev/null)" = "$stamp" ]; then
        echo "$name.wasm: up to date"
        return
    fi
    start=$SECONDS
    tmp=$out/$name.wasm.tmp
    rm -f "$tmp" "$out/$name.wasm.stamp"
    "$@" || die "building $name.wasm failed"
    [ -s "$tmp" ] || die "building $name.wasm wrote nothing"
    mv "$tmp" "$out/$name.wasm"
    echo "$stamp" >"$out/$name.wasm.stamp"
    echo "$name.wasm: built in $((SECONDS - start)) s, $(wc -c <"$out/$name.wasm") bytes"
}

# componentize-py bundles the app's directory (-p) and the stdlib. It runs
# from a copy, so that nothing else is picked up and the .pyc files its
# CPython writes stay out of the source tree.
python_component() { # APP_DIR WORLD
    rm -rf "$out/src/$1"
    mkdir -p "$out/src/$1"
    cp "$here/python/$1"/*.py "$out/src/$1/"
    (cd "$out/src/$1" && componentize_py --quiet -d "$out/wit/py" -w "$2" componentize -p . app -o "$tmp")
}

# componentize-js's own CLI, so that its pinned version (not the one jco
# 1.35 nests for itself) builds it.
js_fetch() {
    "$componentize_js" "$here/js/fetch.js" -w "$out/wit/js" -n fetch -o "$tmp"
}
# --bundle lets jco map node:net onto wasi:sockets.
js_net() {
    "$jco" componentize "$here/js/net.js" --backend quickjs --bundle -w "$out/wit/js" -n net -o "$tmp" >/dev/null
}
# A handler: NAME.js in the `handler` world (a fetch event), or in WORLD.
js_handler() { # NAME [WORLD]
    "$componentize_js" "$here/js/$1.js" -w "$out/wit/js-handler" -n "${2:-handler}" -o "$tmp"
}

# Your own handler, alone (--handler): NAME.wasm beside the others.
if [ -n "$own" ]; then
    case $own in
        *.js)
            name=$(basename "$own" .js)
            tmp=$out/$name.wasm.tmp
            "$componentize_js" "$own" -w "$out/wit/js-handler" -n handler -o "$tmp" \
                || die "componentize-js could not build $own"
            ;;
        *)
            [ -f "$own/app.py" ] || die "$own: a JavaScript file or a directory with app.py"
            name=$(basename "$own")
            tmp=$out/$name.wasm.tmp
            rm -rf "$out/src/own-$name"
            mkdir -p "$out/src/own-$name"
            cp "$own"/*.py "$out/src/own-$name/"
            (cd "$out/src/own-$name" && componentize_py --quiet -d "$out/wit/py" -w handler componentize -p . app -o "$tmp") \
                || die "componentize-py could not build $own"
            ;;
    esac
    mv "$tmp" "$out/$name.wasm"
    echo "$name.wasm: built, $(wc -c <"$out/$name.wasm") bytes"
    exit 0
fi

# The Python components one after another beside the JavaScript ones:
# each toolchain keeps about one core busy (all nine: 44 s one at a time,
# 38 s in two lines on two cores).
(
    build py-client python/client/app.py python/wit/worlds.wit -- python_component client client
    build py-p3 python/p3/app.py python/wit/worlds.wit -- python_component p3 p3
    build py-handler python/handler/app.py python/wit/worlds.wit -- python_component handler handler
    build py-isolation python/isolation/app.py python/wit/worlds.wit -- python_component isolation handler
    build py-json python/json/app.py python/wit/worlds.wit -- python_component json handler
) &
python_line=$!
(
    build js-fetch js/fetch.js js/wit/worlds.wit -- js_fetch
    build js-isolation js/isolation.js js/wit/handler.wit -- js_handler isolation
    build js-hello js/hello.js js/wit/handler.wit -- js_handler hello
    build js-proxy-hello js/hello.js js/wit/handler.wit -- js_handler hello proxy
    build js-net js/net.js js/wit/worlds.wit -- js_net
) &
javascript_line=$!
failed=0
wait "$python_line" || failed=1
wait "$javascript_line" || failed=1
[ "$failed" -eq 0 ] || die "a component did not build (its message is above)"
