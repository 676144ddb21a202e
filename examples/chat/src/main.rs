//! A line-based chat server: every line a client sends goes to every other
//! client connected, as `PEER: LINE`.
//!
//! ```text
//! chat HOST:PORT
//! moat run --allow-listen=127.0.0.1:7000 chat.wasm 127.0.0.1:7000
//! nc 127.0.0.1 7000        # in two or more other terminals
//! ```
//!
//! Port 0 picks a free port; the address is printed on stdout as
//! `listening on HOST:PORT`.
//!
//! Each client has two tasks. Its reader reads its lines and puts each one
//! in every other client's queue, a bounded channel; its writer drains its
//! own queue into its socket. Putting a line in a queue never waits: a
//! client whose queue is full is not reading what it is sent, and it is
//! disconnected (`dropped ADDR: too slow` on stdout) instead of holding
//! back the others or making the server keep an ever longer backlog for it.
//!
//! A line longer than [`LINE_LIMIT`] bytes disconnects its sender, and so
//! does the end of what it sends: a client that half-closes leaves the chat.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;

use futures::channel::{mpsc, oneshot};
use futures::{FutureExt, StreamExt};
use moat_sdk::{Error, OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};

/// Longest line accepted, its `\n` included.
const LINE_LIMIT: usize = 4096;

/// Lines a client's queue holds. A reader runs for up to
/// [`moat_sdk::task::BUDGET`] lines before the other tasks get their turn,
/// so one busy sender can put that many lines in every queue before any
/// writer runs. Four turns' worth leaves a healthy client room for the
/// moments its socket is full, and still bounds what a client that stops
/// reading costs (at most 512 lines, shared with the other queues).
const QUEUE: usize = 4 * moat_sdk::task::BUDGET as usize;

/// Most bytes a writer gathers from its queue into one write: one SDK read
/// chunk, so a backlog of short lines costs a few writes, not one each.
const BATCH: usize = 64 * 1024;

/// One line on its way to the clients, `PEER: ` prefix and `\n` included;
/// every queue holds the same bytes.
type Line = Rc<[u8]>;

/// The clients connected, by id. Tasks take turns on one thread, so a
/// `RefCell` is enough (and no borrow is held across an `await`).
type Clients = Rc<RefCell<HashMap<u64, Client>>>;

/// What the others need to reach one client.
struct Client {
    addr: SocketAddr,
    /// Lines for its writer.
    queue: mpsc::Sender<Line>,
    /// Tells its session it was dropped from the chat.
    kick: oneshot::Sender<()>,
}

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7000".to_owned());
    // A string that is not HOST:PORT fails here, saying so.
    let listener = TcpListener::bind(addr.as_str()).await?;
    println!("listening on {}", listener.local_addr()?);
    let clients = Clients::default();
    let mut next_id: u64 = 0;
    loop {
        let (conn, peer) = listener.accept().await?;
        moat_sdk::spawn(session(next_id, conn, peer, Rc::clone(&clients)));
        next_id += 1;
    }
}

/// One client, from its connection to its leaving: registers it, starts its
/// writer, and reads its lines until it leaves or is dropped.
async fn session(id: u64, conn: TcpStream, peer: SocketAddr, clients: Clients) {
    let (reader, writer) = conn.into_split();
    let (queue, queued) = mpsc::channel(QUEUE);
    let (kick, mut kicked) = oneshot::channel();
    clients.borrow_mut().insert(
        id,
        Client {
            addr: peer,
            queue,
            kick,
        },
    );
    let writer = moat_sdk::spawn(write_lines(writer, queued));
    let mut reading = std::pin::pin!(read_lines(reader, id, peer, &clients).fuse());
    // A dropped client may be waiting for its next line, or be in the
    // middle of one: either way its reading stops here.
    futures::select! {
        read = reading => {
            if let Err(e) = read {
                eprintln!("chat: {peer}: {e}");
            }
        }
        // Whoever dropped it said why.
        _ = kicked => {}
    }
    clients.borrow_mut().remove(&id);
    // Its writer may be stuck in a write to a peer that does not read:
    // aborting it drops its half of the socket wherever it is.
    writer.abort();
}

/// Reads a client's lines and passes each on, until the client has sent
/// everything (`Ok`) or its connection fails.
async fn read_lines(
    mut reader: OwnedReadHalf,
    id: u64,
    peer: SocketAddr,
    clients: &Clients,
) -> Result<(), Error> {
    let prefix = format!("{peer}: ");
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b"\n", &mut buf, LINE_LIMIT).await {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(Error::InvalidArgument(_)) => {
                println!("dropped {peer}: line longer than {LINE_LIMIT} bytes");
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        let mut line = Vec::with_capacity(prefix.len() + buf.len() + 1);
        line.extend_from_slice(prefix.as_bytes());
        line.extend_from_slice(&buf);
        if !line.ends_with(b"\n") {
            line.push(b'\n'); // the last line, cut short by the end of the stream
        }
        broadcast(clients, id, Line::from(line));
    }
}

/// Queues `line` for every client but its sender. A client whose queue is
/// full is dropped from the chat.
fn broadcast(clients: &Clients, from: u64, line: Line) {
    let mut clients = clients.borrow_mut();
    let mut slow = Vec::new();
    for (&id, client) in clients.iter_mut() {
        if id == from {
            continue;
        }
        // A send that fails otherwise found its writer ended (its
        // connection failed): its session sees the failure too, and
        // removes it.
        if let Err(e) = client.queue.try_send(Rc::clone(&line))
            && e.is_full()
        {
            slow.push(id);
        }
    }
    for id in slow {
        if let Some(client) = clients.remove(&id) {
            println!("dropped {}: too slow", client.addr);
            let _ = client.kick.send(());
        }
    }
}

/// Writes a client's queued lines to it, in order, until its queue ends or
/// a write fails; then half-closes.
async fn write_lines(mut writer: OwnedWriteHalf, mut queued: mpsc::Receiver<Line>) {
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(line) = queued.next().await {
        batch.clear();
        batch.extend_from_slice(&line);
        // What else is queued already goes in the same write.
        while batch.len() < BATCH {
            match queued.next().now_or_never() {
                Some(Some(line)) => batch.extend_from_slice(&line),
                _ => break, // nothing more yet, or the queue ended
            }
        }
        batch = match writer.write_all_owned(batch).await {
            Ok(emptied) => emptied,
            Err(_) => return, // the peer is gone; its reader will see it too
        };
    }
    let _ = writer.shutdown().await;
}
