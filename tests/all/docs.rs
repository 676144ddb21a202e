//! The README and the pages of docs/ as a newcomer reads them: every
//! `moat` command in their `sh` blocks, copied as written, is one the real
//! `moat` takes (run from an empty directory, it gets as far as reading its
//! component: a renamed or misspelled flag fails here); every page's
//! Contents lists its headings; every relative link leads to a file.

use std::path::PathBuf;
use std::process::Command;

use crate::outside::root;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// The README, every page of docs/ and the recipes' README.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![
        root().join("README.md"),
        root().join("examples/foreign/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The fenced blocks of `lang` in `text`.
fn blocks<'t>(text: &'t str, lang: &str) -> Vec<&'t str> {
    let fence = format!("```{lang}\n");
    text.split(&fence)
        .skip(1)
        .map(|rest| &rest[..rest.find("```").expect("a closed block")])
        .collect()
}

/// The commands of a `sh` block: comments and blank lines dropped, a
/// continued line (`\` at its end) joined to the next. In a block that
/// shows a session (`$ ` before each command), the lines after a command
/// are what it printed.
fn commands(block: &str) -> Vec<String> {
    session(block)
        .into_iter()
        .map(|(command, _)| command)
        .collect()
}

/// As [`commands`], each with the lines the block shows it printing.
fn session(block: &str) -> Vec<(String, Vec<String>)> {
    let prompted = block.lines().any(|l| l.trim_start().starts_with("$ "));
    let mut commands: Vec<(String, Vec<String>)> = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        let line = match (prompted, line.strip_prefix("$ ")) {
            (true, None) if current.is_empty() => {
                if let Some((_, printed)) = commands.last_mut() {
                    printed.push(line.to_owned());
                }
                continue;
            }
            (_, Some(command)) => command,
            (_, None) => line,
        };
        match line.strip_suffix('\\') {
            Some(more) => {
                current.push_str(more);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                commands.push((std::mem::take(&mut current), Vec::new()));
            }
        }
    }
    commands
}

/// What the docs' commands get as `XDG_CACHE_HOME`: they name no
/// `--cache-dir`, so moat caches under it. In the target directory, not in
/// the user's own `~/.cache/moat`: the tests do not fill a cache that the
/// user's runs (and the next test run) would then find, and a fresh clone
/// starts them as cold as a fresh machine.
fn xdg_cache_home() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("docs-xdg-cache")
}

/// A command line's words, as a shell splits one without quotes,
/// variables or globs (what the docs' `moat` lines use).
fn words(command: &str) -> Vec<String> {
    command.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn every_moat_command_in_the_docs_is_one_moat_takes() {
    let empty = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("docs-commands");
    let _ = std::fs::remove_dir_all(&empty);
    std::fs::create_dir_all(&empty).unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in blocks(&text, "sh") {
            for command in commands(block) {
                let words = words(&command);
                if words.first().map(String::as_str) != Some("moat") {
                    continue;
                }
                if words
                    .iter()
                    .any(|w| w.contains(['|', '>', '<', '$', '"', '\'']))
                {
                    wrong.push(format!(
                        "{}: not a plain command: {command}",
                        page.display()
                    ));
                    continue;
                }
                // The directories it gives the guest are there, empty.
                for dir in words.iter().filter_map(|w| w.strip_prefix("--dir=")) {
                    let host = dir.split("::").next().unwrap_or(dir);
                    let host = host
                        .strip_suffix(":rw")
                        .or(host.strip_suffix(":ro"))
                        .unwrap_or(host);
                    std::fs::create_dir_all(empty.join(host)).unwrap();
                }
                let out = Command::new(MOAT)
                    .args(&words[1..])
                    .current_dir(&empty)
                    .env_remove("RUST_LOG")
                    .env("XDG_CACHE_HOME", xdg_cache_home())
                    .output()
                    .expect("moat runs");
                let stderr = String::from_utf8_lossy(&out.stderr);
                // From an empty directory the component is not there: a
                // command moat takes stops at reading it, exit status 1..
                // `moat grants suggest TRAIL` reads a trail, which an
                // earlier command of the page may have made (empty).
                let took = stderr.contains("cannot read") && stderr.contains("No such file")
                    || (words.get(1).map(String::as_str) == Some("grants") && out.status.success());
                if !took {
                    wrong.push(format!(
                        "{}: `{command}` (exit {:?}):\n{stderr}",
                        page.display(),
                        out.status.code()
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 20, "only {checked} moat commands found");
    eprintln!("{checked} moat commands checked");
}

/// A heading's anchor as GitHub makes it.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The `##` and `###` headings of `text`, outside fenced blocks.
fn headings(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        if let Some(h) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            found.push(h.trim().to_owned());
        }
    }
    found
}

#[test]
fn every_page_of_docs_lists_its_headings_and_its_links_lead_somewhere() {
    let mut wrong = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let headings = headings(&text);
        let mut seen = std::collections::HashSet::new();
        for heading in &headings {
            if !seen.insert(anchor(heading)) {
                wrong.push(format!("{name}: {heading:?} twice (one anchor for both)"));
            }
        }
        let listed = text.contains("**Contents**") || text.contains("**Contents:**");
        if headings.len() >= 2 && page.starts_with(root().join("docs")) {
            if !listed {
                wrong.push(format!(
                    "{name}: {} headings and no Contents",
                    headings.len()
                ));
            }
            for heading in &headings {
                let link = format!("](#{})", anchor(heading));
                if !text.contains(&link) {
                    wrong.push(format!("{name}: Contents lacks {heading:?} ({link})"));
                }
            }
        }
        let dir = page.parent().unwrap();
        for piece in text.split("](").skip(1) {
            let Some(end) = piece.find(')') else { continue };
            let target = &piece[..end];
            if target.starts_with("http") || target.starts_with('#') || target.contains(' ') {
                continue;
            }
            let path = target.split('#').next().unwrap();
            if !dir.join(path).exists() {
                wrong.push(format!("{name}: a link to {target}, which is not there"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The guest a docs command names by its file, where the tests build it.
fn built(component: &str) -> Option<&'static str> {
    let name = component.rsplit('/').next()?;
    Some(match name {
        "echo-server.wasm" => crate::support::guests::ECHO_SERVER,
        "udp-echo.wasm" => crate::support::guests::UDP_ECHO,
        "std-echo.wasm" => crate::support::guests::STD_ECHO,
        "std-fetch.wasm" => crate::support::guests::STD_FETCH,
        "ncat.wasm" => crate::support::guests::NCAT,
        "wstd-serve.wasm" => crate::support::guests::WSTD_SERVE,
        "probe.wasm" => crate::support::guests::PROBE,
        _ => return None,
    })
}

/// The `moat` commands of the docs that can run on this machine (their
/// component is one the tests build; no grant lets the guest reach a host
/// outside it, as one for `example.com` would; they need no certificates
/// or directories) run as written, from a directory where the component
/// is at the path they give: a server until it says it listens (then it
/// is stopped, before any request), a client to its end. In `sh` blocks,
/// and in the sessions of `text` blocks (`$ ` before each command) that
/// show what a command prints: what the docs show a command printing, it
/// prints, and a command shown printing nothing may not end in an error
/// of moat's.
#[tokio::test]
async fn the_moat_commands_that_can_run_here_run_as_the_docs_say() {
    let mut ran = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let shown = blocks(&text, "text")
            .into_iter()
            .filter(|block| block.lines().any(|l| l.starts_with("$ moat ")))
            .flat_map(session)
            .filter(|(_, printed)| !printed.is_empty());
        let runs: Vec<_> = blocks(&text, "sh")
            .into_iter()
            .flat_map(session)
            .chain(shown)
            .collect();
        for (command, printed) in runs {
            let words = words(&command);
            // A guest run with a grant for a host outside this machine
            // would go there (a server only listens until it is stopped).
            if words.first().map(String::as_str) != Some("moat")
                || (words.get(1).map(String::as_str) == Some("run")
                    && words
                        .iter()
                        .any(|w| w.starts_with("--allow-") && w.contains("example")))
                || command.contains("--dir")
            {
                continue;
            }
            let Some(at) = words.iter().position(|w| w.ends_with(".wasm")) else {
                continue;
            };
            let Some(guest) = built(&words[at]) else {
                continue;
            };
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("docs-runs");
            let _ = std::fs::remove_dir_all(&dir);
            let component = dir.join(&words[at]);
            std::fs::create_dir_all(component.parent().unwrap()).unwrap();
            // A file, not a link: moat reads a component only as itself
            // (docs/trusted-files.md).
            if std::fs::hard_link(guest, &component).is_err() {
                std::fs::copy(guest, &component).unwrap();
            }
            let mut child = tokio::process::Command::new(MOAT)
                .args(&words[1..])
                .current_dir(&dir)
                .env_remove("RUST_LOG")
                .env("XDG_CACHE_HOME", xdg_cache_home())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("moat runs");
            let (out, listened, status) = output_until_listening(&mut child).await;
            // A command the docs show failing prints what they show;
            // any other listens, or ends well, without an error of moat's.
            if printed.is_empty() {
                assert!(
                    !out.contains("moat: error") && (listened || status == Some(0)),
                    "{}: `{command}` neither listened nor ended well ({status:?}):\n{out}",
                    page.display()
                );
            }
            for line in &printed {
                assert!(
                    out.contains(line.as_str()),
                    "{}: `{command}` does not print {line:?}; it printed:\n{out}",
                    page.display()
                );
            }
            ran.push(command);
        }
    }
    assert!(ran.len() >= 11, "only these ran: {ran:#?}");
    assert!(
        ran.iter().any(|c| c.starts_with("moat serve")),
        "no moat serve ran: {ran:#?}"
    );
    eprintln!("ran: {ran:#?}");
}

/// What `child` printed (stdout, then stderr), once it ends or says it
/// serves (`listening on`, `moat: serving`); whether it said so (a server
/// is stopped then), and its exit status if it ended by itself.
async fn output_until_listening(child: &mut tokio::process::Child) -> (String, bool, Option<i32>) {
    use tokio::io::AsyncReadExt;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (mut out_done, mut err_done) = (false, false);
    let listening = |out: &[u8], err: &[u8]| {
        String::from_utf8_lossy(out).contains("listening on")
            || String::from_utf8_lossy(err).contains("moat: serving")
    };
    crate::support::within("the docs' command", async {
        let (mut a, mut b) = ([0u8; 4096], [0u8; 4096]);
        while !(out_done && err_done) && !listening(&out, &err) {
            tokio::select! {
                n = stdout.read(&mut a), if !out_done => match n {
                    Ok(0) | Err(_) => out_done = true,
                    Ok(n) => out.extend_from_slice(&a[..n]),
                },
                n = stderr.read(&mut b), if !err_done => match n {
                    Ok(0) | Err(_) => err_done = true,
                    Ok(n) => err.extend_from_slice(&b[..n]),
                },
            }
        }
    })
    .await;
    let listened = listening(&out, &err);
    if listened {
        let _ = child.start_kill();
    }
    let status = crate::support::within("the docs' command ending", child.wait())
        .await
        .ok()
        .and_then(|status| status.code())
        .filter(|_| !listened);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&err)
    );
    (printed, listened, status)
}

/// Issue 57: docs/embedding.md's program is the one the workspace builds
/// and demo.sh runs (examples/embed/src/bin/quickstart.rs), word for word,
/// and its Cargo.toml lines name what that program uses.
#[test]
fn the_embedding_page_shows_the_program_that_is_built() {
    let page = std::fs::read_to_string(root().join("docs/embedding.md")).unwrap();
    let program =
        std::fs::read_to_string(root().join("examples/embed/src/bin/quickstart.rs")).unwrap();
    let rust = blocks(&page, "rust");
    assert_eq!(
        rust.first().copied(),
        Some(program.as_str()),
        "docs/embedding.md's first rust block is not quickstart.rs"
    );
    let toml = blocks(&page, "toml");
    let manifest = toml.first().expect("a Cargo.toml block");
    for dependency in ["moat-host", "tokio", "anyhow"] {
        assert!(
            manifest.contains(&format!("\n{dependency} = ")),
            "{dependency} is not in:\n{manifest}"
        );
    }
    assert!(
        program.contains("#[tokio::main(flavor = \"current_thread\")]")
            && manifest.contains("\"rt\", \"macros\""),
        "the runtime the program uses is the one the manifest asks for"
    );
    let demo = std::fs::read_to_string(root().join("demo.sh")).unwrap();
    assert!(demo.contains("target/debug/quickstart"), "demo.sh runs it");
}

/// Issue 58: a manifest or installer file of deploy/ that sends its reader
/// to `docs/PAGE.md, "Heading"` (or `the README, "Heading"`) names a page
/// and heading that exist (before, three manifests pointed at a README
/// section that had moved). Comment lines are joined, so that a reference
/// may wrap.
#[test]
fn every_reference_of_deploy_to_the_docs_leads_to_a_heading() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    let mut files = vec![root().join("deploy")];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let joined: String = text
            .lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ");
        for (prefix, page) in [("docs/", None), ("the README, \"", Some("README.md"))] {
            for (at, _) in joined.match_indices(prefix) {
                let rest = &joined[at + prefix.len()..];
                let (page, heading) = match page {
                    Some(page) => (page.to_owned(), rest.split('"').next().unwrap()),
                    None => {
                        let Some((page, after)) = rest.split_once(".md, \"") else {
                            continue;
                        };
                        if page.contains(' ') {
                            continue;
                        }
                        (format!("docs/{page}.md"), after.split('"').next().unwrap())
                    }
                };
                checked += 1;
                let Ok(target) = std::fs::read_to_string(root().join(&page)) else {
                    wrong.push(format!("{}: {page} is not there", path.display()));
                    continue;
                };
                if !headings(&target).iter().any(|h| h == heading) {
                    wrong.push(format!(
                        "{}: {page} has no heading {heading:?}",
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 3, "the references were found ({checked})");
}
