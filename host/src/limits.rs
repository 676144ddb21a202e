//! Every bound on what a guest or a client can make the host hold.
//!
//! The bounds a setting sets are [`Limits`], one field a setting, each
//! [`Bound`] with its default and why beside the settings table
//! (moat-policy's; `Limits::default()` is what `moat run` uses).
//!
//! The caps below no setting raises: each is far above what a real program
//! needs and low enough that a hostile one cannot make the host hold more.
//! They are the crate's own (a value here is the one in force); what each
//! bounds, and the test that walks it, is in `docs/inventory.md`.
//!
//! | cap | value | what meets it |
//! |---|---|---|
//! | a PEM input (a chain, a key, a set of roots) | 512 KiB | a TLS call: `invalid-argument` naming the size |
//! | certificates in a guest's chain | 10 | as above |
//! | roots a guest adds to one connection or listener | 512 | as above |
//! | TLS configurations alive at once | 1,024 | a TLS call |
//! | TLS handshakes a listener runs at once | 256 | the next client waits in the kernel's backlog |
//! | bytes read past a plain exchange before a TLS upgrade | 64 KiB | the upgrade fails |
//! | bytes a socket queues past what the kernel took | 64 KiB | the next write waits for it to drain |
//! | a UDP datagram | 65,527 bytes | the send, before its destination is judged |
//! | addresses kept from one name's answer | 256 | the rest are cut |
//! | wasi:sockets 0.3 UDP receives waiting at once | 256 | the next receive fails at once |
//! | a captured stdout or stderr ([`crate::Captured`]) | 16 MiB | the guest is stopped with an error |
//! | table elements, all tables together | 1,000,000 | the guest's `table.grow` fails |
//! | the process's descriptors (`moat run`, the shim: [`crate::descriptors`]) | twice the socket cap, plus `--max-lookups`, plus 512 | "too many open files", as an error to the guest |
//! | text kept of a host, path or reason in a trail record | 256 bytes | the rest is cut, and the record says so |
//! | distinct denials counted for repeats | 4,096 | past it each is written whole |
//! | UDP destinations counted | 4,096 | the counts are written out, and start over |
//! | trail records waiting for the sink | 1,024, and 4 MiB | the guest's next audited call waits |
//! | HTTP/2 streams a `moat serve` connection opens at once | 100 | the client's next stream waits |
//! | HTTP/2 windows of `moat serve` | 256 KiB a stream | the client's sending waits |
//! | `--metrics` connections | 64, 32 from one address | closed as accepted |
//! | a `--metrics` request's head; its whole connection | 1 s; 10 s | the connection is closed |
//! | kept-alive outgoing HTTP connections to one authority | 16, 30 s idle | closed, not kept |
//! | a secret's value (`--secret`) | 16 bytes at least, 16 KiB at most | the run does not start, naming the secret and the length |

pub use moat_policy::limits::{Bound, Limits, NotABound};
