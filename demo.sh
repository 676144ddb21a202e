#!/usr/bin/env bash
# The moat demo: builds moat and the example guests, then runs them against
# each other over real sockets on 127.0.0.1, with and without the grants
# they need. Everything it runs is printed before it runs.
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; }

step "Toolchain (rust-toolchain.toml: Rust 1.99.1 with the wasm32-wasip2 target)"
show rustup toolchain install
rustup toolchain install >/dev/null 2>&1 || rustup target add wasm32-wasip2

step "Build moat, the embedding example and the example guests"
show cargo build -p moat -p embed
cargo build -q -p moat -p embed
show cargo build --release --target wasm32-wasip2 -p echo-server -p ncat -p udp-echo -p http-server -p std-echo -p std-fetch -p hyper-serve -p hyper-fetch
cargo build -q --release --target wasm32-wasip2 -p echo-server -p ncat -p udp-echo -p http-server -p std-echo -p std-fetch -p hyper-serve -p hyper-fetch

MOAT=target/debug/moat
GUESTS=target/wasm32-wasip2/release
LOG=$(mktemp)
cleanup() { [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null; rm -f "$LOG"; }
trap cleanup EXIT

step "An echo server guest, allowed to listen on 127.0.0.1 (port 0: any free port)"
show "$MOAT run --allow-listen=127.0.0.1:0 $GUESTS/echo-server.wasm 127.0.0.1:0 &"
"$MOAT" run --allow-listen=127.0.0.1:0 "$GUESTS/echo-server.wasm" 127.0.0.1:0 >"$LOG" 2>&1 &
SERVER=$!
for _ in $(seq 1 600); do
  grep -q '^listening on ' "$LOG" && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.05
done
ADDR=$(sed -n 's/^listening on //p' "$LOG" | head -n1)
[ -n "$ADDR" ] || { echo "the echo server did not start:"; cat "$LOG"; exit 1; }
PORT=${ADDR##*:}
echo "listening on $ADDR"

step "ncat, allowed to reach exactly that address: stdin goes out, the echo comes back"
show "printf 'hello through moat\n' | $MOAT run --allow-net=127.0.0.1:$PORT $GUESTS/ncat.wasm 127.0.0.1 $PORT"
printf 'hello through moat\n' | "$MOAT" run --allow-net="127.0.0.1:$PORT" "$GUESTS/ncat.wasm" 127.0.0.1 "$PORT"

step "ncat without the grant: denied before any socket exists, with the flag that would allow it"
show "$MOAT run $GUESTS/ncat.wasm 127.0.0.1 $PORT </dev/null"
"$MOAT" run "$GUESTS/ncat.wasm" 127.0.0.1 "$PORT" </dev/null && exit 1 || echo "(exit status $?)"

step "Hosts are judged as written: allowing localhost does not allow 127.0.0.1"
show "$MOAT run --allow-net=localhost:$PORT $GUESTS/ncat.wasm 127.0.0.1 $PORT </dev/null"
"$MOAT" run --allow-net="localhost:$PORT" "$GUESTS/ncat.wasm" 127.0.0.1 "$PORT" </dev/null && exit 1 || echo "(exit status $?)"

step "Numeric tricks are refused, not resolved: 127.1 is not 127.0.0.1"
show "$MOAT run --allow-net=localhost $GUESTS/ncat.wasm 127.1 $PORT </dev/null"
"$MOAT" run --allow-net=localhost "$GUESTS/ncat.wasm" 127.1 "$PORT" </dev/null && exit 1 || echo "(exit status $?)"

step "UDP: an echo guest needs both grants (listen for its port, net for the senders it answers)"
UDP_LOG=$(mktemp)
show "$MOAT run --allow-listen=127.0.0.1:0 --allow-net=127.0.0.1 $GUESTS/udp-echo.wasm 127.0.0.1:0 &"
"$MOAT" run --allow-listen=127.0.0.1:0 --allow-net=127.0.0.1 "$GUESTS/udp-echo.wasm" 127.0.0.1:0 >"$UDP_LOG" 2>&1 &
UDP_SERVER=$!
for _ in $(seq 1 600); do grep -q '^listening on ' "$UDP_LOG" && break; sleep 0.05; done
UDP_PORT=$(sed -n 's/^listening on .*://p' "$UDP_LOG" | head -n1)
show "printf 'one\ntwo\n' | $MOAT run --allow-listen=0.0.0.0:0 --allow-net=127.0.0.1:$UDP_PORT $GUESTS/ncat.wasm -u 127.0.0.1 $UDP_PORT"
printf 'one\ntwo\n' | "$MOAT" run --allow-listen=0.0.0.0:0 --allow-net="127.0.0.1:$UDP_PORT" "$GUESTS/ncat.wasm" -u 127.0.0.1 "$UDP_PORT"
kill "$UDP_SERVER" 2>/dev/null; rm -f "$UDP_LOG"

step "Programs you did not write for moat: plain std::net, under the same grants"
STD_LOG=$(mktemp)
show "$MOAT run --allow-listen=127.0.0.1:0 $GUESTS/std-echo.wasm 127.0.0.1:0 &"
"$MOAT" run --allow-listen=127.0.0.1:0 "$GUESTS/std-echo.wasm" 127.0.0.1:0 >"$STD_LOG" 2>&1 &
STD_SERVER=$!
for _ in $(seq 1 600); do grep -q '^listening on ' "$STD_LOG" && break; sleep 0.05; done
STD_PORT=$(sed -n 's/^listening on .*://p' "$STD_LOG" | head -n1)
[ -n "$STD_PORT" ] || { echo "std-echo did not start:"; cat "$STD_LOG"; exit 1; }
echo "listening on 127.0.0.1:$STD_PORT"
show "printf 'hello, std::net\n' | $MOAT run --allow-net=127.0.0.1:$STD_PORT $GUESTS/ncat.wasm 127.0.0.1 $STD_PORT"
printf 'hello, std::net\n' | "$MOAT" run --allow-net="127.0.0.1:$STD_PORT" "$GUESTS/ncat.wasm" 127.0.0.1 "$STD_PORT"
kill "$STD_SERVER" 2>/dev/null; rm -f "$STD_LOG"

WEB_LOG=$(mktemp)
show "$MOAT run --allow-listen=127.0.0.1:0 $GUESTS/http-server.wasm 127.0.0.1:0 &"
"$MOAT" run --allow-listen=127.0.0.1:0 "$GUESTS/http-server.wasm" 127.0.0.1:0 >"$WEB_LOG" 2>&1 &
WEB_SERVER=$!
for _ in $(seq 1 600); do grep -q '^listening on ' "$WEB_LOG" && break; sleep 0.05; done
WEB_PORT=$(sed -n 's/^listening on .*://p' "$WEB_LOG" | head -n1)
[ -n "$WEB_PORT" ] || { echo "http-server did not start:"; cat "$WEB_LOG"; exit 1; }
echo "# std-fetch looks localhost up and connects to an address; moat judges the connect as localhost:$WEB_PORT"
show "$MOAT run --allow-net=localhost:$WEB_PORT $GUESTS/std-fetch.wasm localhost:$WEB_PORT /"
"$MOAT" run --allow-net="localhost:$WEB_PORT" "$GUESTS/std-fetch.wasm" "localhost:$WEB_PORT" /
echo "# A name no grant names is refused before any DNS query:"
show "$MOAT run --allow-net=localhost:$WEB_PORT $GUESTS/std-fetch.wasm example.com /"
"$MOAT" run --allow-net="localhost:$WEB_PORT" "$GUESTS/std-fetch.wasm" example.com / && exit 1 || echo "(exit status $?)"
echo "# The address itself was never granted (the grant names localhost):"
show "$MOAT run --allow-net=localhost:$WEB_PORT $GUESTS/std-fetch.wasm 127.0.0.1:$WEB_PORT /"
"$MOAT" run --allow-net="localhost:$WEB_PORT" "$GUESTS/std-fetch.wasm" "127.0.0.1:$WEB_PORT" / && exit 1 || echo "(exit status $?)"
echo "# The same from a Rust program of five calls (docs/embedding.md's, word for word):"
show target/debug/quickstart "$GUESTS/std-fetch.wasm" "127.0.0.1:$WEB_PORT"
QUICK=$(target/debug/quickstart "$GUESTS/std-fetch.wasm" "127.0.0.1:$WEB_PORT")
printf '%s\n' "$QUICK"
grep -qx "std-fetch exited 0" <<<"$QUICK" || { echo "quickstart did not fetch"; exit 1; }
kill "$WEB_SERVER" 2>/dev/null; rm -f "$WEB_LOG"

step "hyper 1 on moat-sdk: an HTTP/1.1 server guest, and a client guest fetching from it"
HYPER_LOG=$(mktemp)
show "$MOAT run --allow-listen=127.0.0.1:0 $GUESTS/hyper-serve.wasm 127.0.0.1:0 &"
"$MOAT" run --allow-listen=127.0.0.1:0 "$GUESTS/hyper-serve.wasm" 127.0.0.1:0 >"$HYPER_LOG" 2>&1 &
HYPER_SERVER=$!
for _ in $(seq 1 600); do grep -q '^listening on ' "$HYPER_LOG" && break; sleep 0.05; done
HYPER_PORT=$(sed -n 's/^listening on .*://p' "$HYPER_LOG" | head -n1)
[ -n "$HYPER_PORT" ] || { echo "hyper-serve did not start:"; cat "$HYPER_LOG"; exit 1; }
show "$MOAT run --allow-net=localhost:$HYPER_PORT $GUESTS/hyper-fetch.wasm http://localhost:$HYPER_PORT/"
"$MOAT" run --allow-net="localhost:$HYPER_PORT" "$GUESTS/hyper-fetch.wasm" "http://localhost:$HYPER_PORT/"
if command -v curl >/dev/null; then
  show "curl http://127.0.0.1:$HYPER_PORT/whoami"
  curl -sS "http://127.0.0.1:$HYPER_PORT/whoami"
fi
echo "# A 404 makes hyper-fetch exit 22, as curl -f does:"
show "$MOAT run --allow-net=localhost:$HYPER_PORT $GUESTS/hyper-fetch.wasm http://localhost:$HYPER_PORT/missing"
"$MOAT" run --allow-net="localhost:$HYPER_PORT" "$GUESTS/hyper-fetch.wasm" "http://localhost:$HYPER_PORT/missing" && exit 1 || echo "(exit status $?)"
kill "$HYPER_SERVER" 2>/dev/null; rm -f "$HYPER_LOG"

if command -v openssl >/dev/null && command -v curl >/dev/null; then
  step "TLS in the host: an HTTPS guest, with a certificate from a directory it was given"
  CERTS=$(mktemp -d)
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -keyout "$CERTS/key.pem" -out "$CERTS/cert.pem" 2>/dev/null
  HTTPS_LOG=$(mktemp)
  show "$MOAT run --allow-listen=127.0.0.1:0 --dir=$CERTS::/certs $GUESTS/http-server.wasm --tls /certs/cert.pem /certs/key.pem 127.0.0.1:0 &"
  "$MOAT" run --allow-listen=127.0.0.1:0 --dir="$CERTS::/certs" "$GUESTS/http-server.wasm" --tls /certs/cert.pem /certs/key.pem 127.0.0.1:0 >"$HTTPS_LOG" 2>&1 &
  HTTPS_SERVER=$!
  for _ in $(seq 1 600); do grep -q '^listening on ' "$HTTPS_LOG" && break; sleep 0.05; done
  HTTPS_PORT=$(sed -n 's/^listening on .*://p' "$HTTPS_LOG" | head -n1)
  show "curl --cacert cert.pem https://localhost:$HTTPS_PORT/ https://localhost:$HTTPS_PORT/whoami"
  curl -sS --cacert "$CERTS/cert.pem" "https://localhost:$HTTPS_PORT/" "https://localhost:$HTTPS_PORT/whoami"
  kill "$HTTPS_SERVER" 2>/dev/null; rm -rf "$CERTS" "$HTTPS_LOG"
else
  step "TLS: skipped (the demo uses openssl and curl, which this machine lacks)"
fi

step "Socket events, for the curious (RUST_LOG=moat::net=debug)"
show "printf 'traced\n' | RUST_LOG=moat::net=debug $MOAT run --allow-net=127.0.0.1:$PORT $GUESTS/ncat.wasm 127.0.0.1 $PORT"
printf 'traced\n' | RUST_LOG=moat::net=debug "$MOAT" run --allow-net="127.0.0.1:$PORT" "$GUESTS/ncat.wasm" 127.0.0.1 "$PORT"

step "A Rust program embedding moat, with its policy built in code (Moat::run, and a linker of its own)"
show target/debug/embed "$GUESTS/ncat.wasm" "$GUESTS/std-fetch.wasm"
target/debug/embed "$GUESTS/ncat.wasm" "$GUESTS/std-fetch.wasm"

step "Done. The whole test suite: ./test.sh"
