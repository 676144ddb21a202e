use moat_host::policy::Policy;
use moat_host::{Captured, Moat, MoatConfig, Output, RunOptions};

// moat keeps a guest and its sockets on one thread: a current-thread
// runtime is enough (a multi-thread one works too).
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(component), Some(server)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: quickstart std-fetch.wasm HOST:PORT");
    };
    // 1. The host: its engines and the compiled-code cache.
    let moat = Moat::new(&MoatConfig::default())?;
    // 2. The component, compiled (or taken from the cache).
    let guest = moat.load(&component)?;
    // 3. What it may reach: that one server, nothing else.
    let policy = Policy::new().allow_connect(&server)?;
    // 4. Its arguments and where its output goes.
    let stdout = Captured::new();
    let options = RunOptions::new(policy)
        .args(["std-fetch", server.as_str(), "/"])
        .stdout(Output::Capture(stdout.clone()));
    // 5. Run it to its end.
    let exit = moat.run(&guest, options).await?;
    print!("{}", String::from_utf8_lossy(&stdout.contents()));
    println!("std-fetch exited {}", exit.code());
    Ok(())
}
