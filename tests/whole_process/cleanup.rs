//! A guest that traps or exits with sockets open leaves none open: its
//! listening port can be bound again at once, its peer sees the connection
//! close, and the host process holds exactly the sockets it held before.
//!
//! One test in this binary, so no other test's sockets muddy the count.

use crate::support;

use std::io::Read;

use crate::support::{free_port, guests, open_sockets, port_is_free, run};
use moat_host::MoatError;
use moat_host::policy::Policy;

#[test]
fn guests_that_trap_or_exit_with_sockets_open_leave_none_open() {
    crate::in_turn(async {
        let policy = Policy::new()
            .allow_connect("127.0.0.1")
            .unwrap()
            .allow_listen("127.0.0.1")
            .unwrap();
        let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer_port = peer.local_addr().unwrap().port().to_string();
        // Engine and compiled guest first, so that only the runs are measured.
        support::guest(guests::PROBE);
        let before = open_sockets();

        for (how, code) in [("trap", None), ("exit", Some(7))] {
            let listen_port = free_port().to_string();
            let mut args = vec![how, "127.0.0.1", &peer_port, &listen_port];
            let code_arg = code.map(|c: i32| c.to_string());
            args.extend(code_arg.as_deref());
            let done = run(guests::PROBE, policy.clone(), &args).await;

            assert!(done.stdout.contains("holding"), "{how}: {}", done.stdout);
            match code {
                None => match &done.exit {
                    // The source is wasmtime's own error: an embedder gets the
                    // trap code by downcasting it.
                    Err(MoatError::Trap(source)) => assert_eq!(
                        source.downcast_ref::<wasmtime::Trap>(),
                        Some(&wasmtime::Trap::UnreachableCodeReached),
                        "{source:?}"
                    ),
                    other => panic!("{how}: {other:?}"),
                },
                Some(code) => assert_eq!(done.code(), code),
            }
            assert!(
                port_is_free(listen_port.parse().unwrap()),
                "{how}: the guest's listening port is still taken"
            );
            let (mut conn, _) = peer.accept().unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).unwrap(); // EOF: the guest's side is closed
            assert_eq!(got, b"holding", "{how}");
            drop(conn);
            assert_eq!(open_sockets(), before, "{how}: sockets left open");
        }
    });
}
