//! A guest crate outside this workspace, made from docs/guests.md (its
//! Cargo.toml and src/main.rs, as printed there), built
//! with cargo and run under `moat run`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// The workspace root (the docs tests read from it too).
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ sits in the workspace")
        .to_owned()
}

/// The first fenced block of `lang` in docs/guests.md whose first line
/// starts with `starts`.
fn readme_block(lang: &str, starts: &str) -> String {
    let section = std::fs::read_to_string(root().join("docs/guests.md")).unwrap();
    let fence = format!("```{lang}\n");
    section
        .split(&fence)
        .skip(1)
        .map(|rest| &rest[..rest.find("```").expect("a closed block")])
        .find(|block| block.starts_with(starts))
        .unwrap_or_else(|| panic!("no ```{lang} block starting {starts:?}"))
        .to_owned()
}

#[tokio::test]
async fn a_guest_crate_made_from_the_readme_builds_outside_the_workspace_and_runs() {
    // Outside the workspace: cargo must not find this repository's
    // Cargo.toml above it.
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("outside");
    let dir = std::env::temp_dir().join(format!("moat-outside-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let sdk = root().join("guest-sdk");
    let manifest = format!(
        "[package]\nname = \"echo\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n{}",
        readme_block("toml", "[dependencies]").replace("../moat/guest-sdk", sdk.to_str().unwrap())
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        readme_block("rust", "use moat_sdk"),
    )
    .unwrap();
    // The workspace's lock file: the same versions, nothing to resolve.
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .current_dir(&dir)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        // A target directory that outlives the temporary crate, so a second
        // run of this test does not rebuild the SDK.
        .env("CARGO_TARGET_DIR", &base)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .stderr(Stdio::inherit())
        .status()
        .unwrap();
    assert!(built.success(), "cargo build of the README's guest failed");
    let wasm = base.join("wasm32-wasip2/release/echo.wasm");
    let size = std::fs::metadata(&wasm).unwrap().len();
    eprintln!("the README's echo guest: {size} bytes");

    let mut guest = tokio::process::Command::new(MOAT)
        .arg("run")
        .arg(format!("--cache-dir={}", base.join("cache").display()))
        .arg("--allow-listen=127.0.0.1:0")
        .arg(&wasm)
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(guest.stdout.take().unwrap()).lines();
    let first = lines.next_line().await.unwrap().expect("a line");
    let addr = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("printed {first:?}"))
        .to_owned();
    let mut conn = TcpStream::connect(addr.as_str()).await.unwrap();
    let message: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    conn.write_all(&message).await.unwrap();
    conn.shutdown().await.unwrap();
    let mut echoed = Vec::new();
    conn.read_to_end(&mut echoed).await.unwrap();
    assert!(
        echoed == message,
        "echoed {} of {} bytes",
        echoed.len(),
        message.len()
    );
    guest.kill().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
