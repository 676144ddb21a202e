//! A stock program: plain std::fs (wasi:filesystem 0.2), no moat
//! dependency. It does what a hostile guest would to reach files it was not
//! given, and reports every attempt on a line of its own, so that tests can
//! check that each one failed and that nothing it should not see was printed.
//!
//! ```text
//! fs-probe read PATH...        print each file's size and first 64 bytes
//! fs-probe write PATH TEXT     create or replace PATH, holding TEXT
//! fs-probe list DIR            print DIR's entries
//! fs-probe raw-read DIR PATH... read each PATH relative to the preopened
//!                              directory DIR with wasi:filesystem's own
//!                              open-at (no wasi-libc on the way)
//! fs-probe escape ROOT [HOST]  try to get out of ROOT, the guest path of a
//!                              directory it was given, whose parent holds a
//!                              file `secret` and which holds the symlinks
//!                              `root -> /`, `p -> /proc` and `up -> ..`
//!                              (HOST: the host path of that parent, for the
//!                              attempts through `root`)
//! fs-probe mutate ROOT         try to change ROOT in every way there is
//!                              (ROOT holds a file `existing` and a directory
//!                              `subdir` with an empty directory `empty`)
//! ```
//!
//! Each attempt prints `ATTEMPT: ok WHAT` or `ATTEMPT: error KIND: MESSAGE`.
//! The program exits 0 once it has reported them all, 2 for a bad command
//! line.

use std::ffi::{CString, c_char, c_int};
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::FromRawFd;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match (arg(0), arg(1), arg(2)) {
        (Some("read"), Some(_), _) => {
            for path in &args[1..] {
                report(&format!("read {path}"), read(path));
            }
        }
        (Some("write"), Some(path), Some(text)) => {
            report(&format!("write {path}"), write(path, text));
        }
        (Some("list"), Some(dir), None) => report(&format!("list {dir}"), list(dir)),
        (Some("raw-read"), Some(dir), Some(_)) => raw_read(dir, &args[2..]),
        (Some("escape"), Some(root), host) => escape(root.trim_end_matches('/'), host),
        (Some("mutate"), Some(root), None) => mutate(root.trim_end_matches('/')),
        _ => {
            eprintln!("fs-probe: bad command line {args:?} (see the source for the modes)");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

/// Prints one attempt's outcome.
fn report(attempt: &str, result: io::Result<String>) {
    match result {
        Ok(what) => println!("{attempt}: ok {what}"),
        Err(e) => println!("{attempt}: error {:?}: {e}", e.kind()),
    }
}

/// A file's size and its first 64 bytes, escaped onto one line.
fn shown(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(64)];
    format!(
        "{} bytes: {}",
        bytes.len(),
        String::from_utf8_lossy(head).escape_debug()
    )
}

fn read(path: &str) -> io::Result<String> {
    fs::read(path).map(|bytes| shown(&bytes))
}

fn write(path: &str, text: &str) -> io::Result<String> {
    fs::write(path, text).map(|()| format!("wrote {} bytes", text.len()))
}

fn list(dir: &str) -> io::Result<String> {
    let mut names = fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<io::Result<Vec<_>>>()?;
    names.sort();
    Ok(format!("{} entries: {}", names.len(), names.join(" ")))
}

fn stat(path: &str) -> io::Result<String> {
    fs::metadata(path).map(|m| format!("{:?}, {} bytes", m.file_type(), m.len()))
}

/// Appends to a file that exists (never creates one).
fn append(path: &str, text: &str) -> io::Result<String> {
    let mut file = OpenOptions::new().append(true).open(path)?;
    file.write_all(text.as_bytes())?;
    Ok(format!("wrote {} bytes", text.len()))
}

/// Opens `PROC_SELF/mem` for writing, and if that works (it must not),
/// writes back the byte it finds at the start of a writable mapping (so
/// that even success changes nothing).
fn poke_mem(proc_self: &str) -> io::Result<String> {
    let mut mem = OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("{proc_self}/mem"))?;
    let address = fs::read_to_string(format!("{proc_self}/maps"))
        .ok()
        .and_then(|maps| writable_address(&maps));
    let Some(address) = address else {
        return Ok("opened for writing (no writable mapping found in maps)".into());
    };
    let poked = (|| {
        let mut byte = [0u8];
        mem.seek(SeekFrom::Start(address))?;
        mem.read_exact(&mut byte)?;
        mem.seek(SeekFrom::Start(address))?;
        mem.write_all(&byte)
    })();
    Ok(match poked {
        Ok(()) => format!("opened for writing; wrote 1 byte at {address:#x}"),
        Err(e) => format!("opened for writing; the write at {address:#x} failed: {e}"),
    })
}

/// The start of the first `rw` mapping in a `/proc/PID/maps` text.
fn writable_address(maps: &str) -> Option<u64> {
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let range = fields.next()?;
        let perms = fields.next()?;
        if !perms.starts_with("rw") {
            return None;
        }
        u64::from_str_radix(range.split('-').next()?, 16).ok()
    })
}

/// Makes a symlink `link -> target`, then reads through it.
fn through_symlink(target: &str, link: &str) -> io::Result<String> {
    #[allow(deprecated)] // fs::soft_link is std's only portable symlink call
    fs::soft_link(target, link)?;
    fs::read(link).map(|bytes| shown(&bytes)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("the link was made, but reading through it failed: {e}"),
        )
    })
}

/// Makes a symlink `link -> target`, then writes through it.
fn write_through_symlink(target: &str, link: &str) -> io::Result<String> {
    #[allow(deprecated)]
    fs::soft_link(target, link)?;
    fs::write(link, "planted through a symlink\n")
        .map(|()| "wrote through the link".to_owned())
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("the link was made, but writing through it failed: {e}"),
            )
        })
}

/// Makes a hard link `link` to `original`, then reads it.
fn through_hard_link(original: &str, link: &str) -> io::Result<String> {
    fs::hard_link(original, link)?;
    read(link)
}

/// Makes `from` (a file of its own), then renames it to `to`.
fn rename_out(from: &str, to: &str) -> io::Result<String> {
    fs::write(from, "moved out\n")?;
    fs::rename(from, to).map(|()| format!("renamed to {to}"))
}

unsafe extern "C" {
    /// wasi-libc's `openat`: the path goes to the host as it is, relative
    /// to `dirfd`, with none of std's or wasi-libc's preopen matching.
    fn openat(dirfd: c_int, path: *const c_char, flags: c_int, ...) -> c_int;
}

// wasi-libc's <fcntl.h>.
const O_RDONLY: c_int = 0x0400_0000;
const O_DIRECTORY: c_int = 0x0002 << 12;

/// `openat(dirfd, path, flags)` as a `File`.
fn raw_open(dirfd: c_int, path: &str, flags: c_int) -> io::Result<File> {
    let path = CString::new(path).map_err(io::Error::other)?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let fd = unsafe { openat(dirfd, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `openat` just returned this descriptor, owned by no one else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// The descriptors of the directories the program was given.
fn preopened_dirs() -> Vec<c_int> {
    (3..64)
        .filter(|&fd| raw_open(fd, ".", O_RDONLY | O_DIRECTORY).is_ok())
        .collect()
}

fn escape(root: &str, host: Option<&str>) {
    // Reading out, by `..`, by absolute paths and through the test's
    // symlinks.
    let mut reads = vec![
        format!("{root}/../../../etc/passwd"),
        format!("{root}/../secret"),
        format!("{root}/./../secret"),
        format!("{root}/up/secret"),
        format!("{root}/up/../secret"),
        "/etc/passwd".to_owned(),
        "/proc/self/environ".to_owned(),
        format!("{root}/root/etc/passwd"),
        format!("{root}/root/proc/self/environ"),
        format!("{root}/p/self/environ"),
        format!("{root}/p/1/environ"),
        format!("{root}/p/self/root/etc/passwd"),
    ];
    if let Some(host) = host {
        reads.push(format!("{root}/root{host}/secret"));
    }
    for path in &reads {
        report(&format!("read {path}"), read(path));
    }
    for path in [
        format!("{root}/../secret"),
        format!("{root}/up/secret"),
        format!("{root}/root/etc/passwd"),
        format!("{root}/p/self/environ"),
    ] {
        report(&format!("stat {path}"), stat(&path));
    }
    for dir in [
        format!("{root}/.."),
        format!("{root}/up"),
        format!("{root}/root"),
        format!("{root}/p"),
        "/".to_owned(),
    ] {
        report(&format!("list {dir}"), list(&dir));
    }

    // The host process's memory, and the container's termination log.
    for proc_self in [
        "/proc/self".to_owned(),
        format!("{root}/p/self"),
        format!("{root}/root/proc/self"),
    ] {
        report(&format!("poke {proc_self}/mem"), poke_mem(&proc_self));
    }
    for log in [
        "/dev/termination-log".to_owned(),
        format!("{root}/root/dev/termination-log"),
    ] {
        report(
            &format!("append {log}"),
            append(&log, "fs-probe was here\n"),
        );
    }

    // Writing out.
    let mut writes = vec![format!("{root}/../planted"), format!("{root}/up/planted")];
    if let Some(host) = host {
        writes.push(format!("{root}/root{host}/planted"));
    }
    for path in &writes {
        report(
            &format!("write {path}"),
            write(path, "planted by fs-probe\n"),
        );
    }
    let dir = format!("{root}/../planted-dir");
    report(
        &format!("mkdir {dir}"),
        fs::create_dir(&dir).map(|()| "made".into()),
    );

    // Links of its own, pointing out.
    for (target, link) in [
        ("/etc/passwd", "made-abs"),
        ("../secret", "made-up"),
        ("../../../../../../../../etc/passwd", "made-deep"),
        ("../../../../../../../../proc/self/environ", "made-proc"),
    ] {
        let link = format!("{root}/{link}");
        report(
            &format!("symlink {link} -> {target}, read it"),
            through_symlink(target, &link),
        );
    }
    let link = format!("{root}/made-w");
    report(
        &format!("symlink {link} -> ../planted-link, write it"),
        write_through_symlink("../planted-link", &link),
    );
    for (original, link) in [
        (format!("{root}/../secret"), "hard-secret"),
        (format!("{root}/up/secret"), "hard-up"),
        ("/etc/passwd".to_owned(), "hard-passwd"),
        (format!("{root}/root/etc/passwd"), "hard-root"),
        (format!("{root}/p/self/environ"), "hard-proc"),
    ] {
        let link = format!("{root}/{link}");
        report(
            &format!("hardlink {link} = {original}, read it"),
            through_hard_link(&original, &link),
        );
    }
    for (from, to) in [
        (format!("{root}/to-move"), format!("{root}/../moved")),
        (format!("{root}/to-move-up"), format!("{root}/up/moved")),
    ] {
        report(&format!("rename {from} -> {to}"), rename_out(&from, &to));
    }

    // The same paths straight to the host, past std's and wasi-libc's own
    // path handling, on every directory the program was given.
    for fd in preopened_dirs() {
        for path in [
            "/etc/passwd",
            "/proc/self/environ",
            "../secret",
            "up/secret",
            "root/etc/passwd",
            "p/self/environ",
        ] {
            let opened = raw_open(fd, path, O_RDONLY).and_then(|mut file| {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                Ok(shown(&bytes))
            });
            report(&format!("raw openat({fd}, {path})"), opened);
        }
        let parent = raw_open(fd, "..", O_RDONLY | O_DIRECTORY).map(|_| "opened".to_owned());
        report(&format!("raw openat({fd}, .., O_DIRECTORY)"), parent);
    }

    // And straight to wasi:filesystem, past wasi-libc too.
    direct(host);

    // A working directory of its own, then `..` from there.
    let from_cwd = std::env::set_current_dir(root).and_then(|()| read("../secret"));
    report(&format!("chdir {root}, read ../secret"), from_cwd);
}

fn mutate(root: &str) {
    let existing = format!("{root}/existing");
    let attempts: Vec<(String, io::Result<String>)> = vec![
        (
            format!("create {root}/new-file"),
            write(&format!("{root}/new-file"), "new\n"),
        ),
        (
            format!("create-new {root}/new-file-2"),
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(format!("{root}/new-file-2"))
                .map(|_| "created".into()),
        ),
        (
            format!("replace {existing}"),
            write(&existing, "replaced\n"),
        ),
        (format!("append {existing}"), append(&existing, "more\n")),
        (
            format!("truncate {existing}"),
            OpenOptions::new()
                .write(true)
                .open(&existing)
                .and_then(|f| f.set_len(0))
                .map(|()| "truncated".into()),
        ),
        (
            format!("set_len {existing} opened for reading"),
            File::open(&existing)
                .and_then(|f| f.set_len(1))
                .map(|()| "truncated".into()),
        ),
        (
            format!("write {existing} opened for reading"),
            File::open(&existing)
                .and_then(|mut f| f.write_all(b"x"))
                .map(|()| "wrote".into()),
        ),
        (
            format!("set_times {existing} opened for reading"),
            File::open(&existing)
                .and_then(|f| f.set_times(epoch_times()))
                .map(|()| "set".into()),
        ),
        (
            format!("set_times {root} opened for reading"),
            File::open(root)
                .and_then(|f| f.set_times(epoch_times()))
                .map(|()| "set".into()),
        ),
        (
            format!("mkdir {root}/new-dir"),
            fs::create_dir(format!("{root}/new-dir")).map(|()| "made".into()),
        ),
        (
            format!("remove {existing}"),
            fs::remove_file(&existing).map(|()| "removed".into()),
        ),
        (
            format!("rmdir {root}/subdir/empty"),
            fs::remove_dir(format!("{root}/subdir/empty")).map(|()| "removed".into()),
        ),
        (
            format!("remove_dir_all {root}/subdir"),
            fs::remove_dir_all(format!("{root}/subdir")).map(|()| "removed".into()),
        ),
        (
            format!("rename {existing} -> {root}/renamed"),
            fs::rename(&existing, format!("{root}/renamed")).map(|()| "renamed".into()),
        ),
        (
            format!("symlink {root}/new-link -> existing"),
            #[allow(deprecated)]
            fs::soft_link("existing", format!("{root}/new-link")).map(|()| "made".into()),
        ),
        (
            format!("hardlink {root}/new-hard = {existing}"),
            fs::hard_link(&existing, format!("{root}/new-hard")).map(|()| "made".into()),
        ),
    ];
    for (attempt, result) in attempts {
        report(&attempt, result);
    }
}

/// Access and modification times of 1970, plus a second.
fn epoch_times() -> FileTimes {
    let then = SystemTime::UNIX_EPOCH + Duration::from_secs(1);
    FileTimes::new().set_accessed(then).set_modified(then)
}

/// wasi:filesystem 0.2 called through its canonical ABI by hand, so that
/// the host sees exactly the paths written here.
mod wasi {
    #[link(wasm_import_module = "wasi:filesystem/preopens@0.2.0")]
    unsafe extern "C" {
        #[link_name = "get-directories"]
        pub fn get_directories(ret: *mut u8);
    }

    #[link(wasm_import_module = "wasi:filesystem/types@0.2.0")]
    unsafe extern "C" {
        #[link_name = "[method]descriptor.open-at"]
        pub fn open_at(
            dir: i32,
            path_flags: i32,
            path: *const u8,
            path_len: usize,
            open_flags: i32,
            flags: i32,
            ret: *mut u8,
        );
        #[link_name = "[method]descriptor.read"]
        pub fn read(file: i32, len: i64, offset: i64, ret: *mut u8);
        #[link_name = "[resource-drop]descriptor"]
        pub fn drop_descriptor(handle: i32);
    }

    pub const SYMLINK_FOLLOW: i32 = 1;
    pub const DIRECTORY: i32 = 2;
    pub const READ: i32 = 1;

    /// error-code's cases, in their order in wasi:filesystem 0.2.
    const ERROR_CODES: &[&str] = &[
        "access",
        "would-block",
        "already",
        "bad-descriptor",
        "busy",
        "deadlock",
        "quota",
        "exist",
        "file-too-large",
        "illegal-byte-sequence",
        "in-progress",
        "interrupted",
        "invalid",
        "io",
        "is-directory",
        "loop",
        "too-many-links",
        "message-size",
        "name-too-long",
        "no-device",
        "no-entry",
        "no-lock",
        "insufficient-memory",
        "insufficient-space",
        "not-directory",
        "not-empty",
        "not-recoverable",
        "unsupported",
        "no-tty",
        "no-such-device",
        "overflow",
        "not-permitted",
        "pipe",
        "read-only",
        "invalid-seek",
        "text-file-busy",
        "cross-device",
    ];

    /// An error-code as a `KIND: MESSAGE` pair.
    pub fn error(code: u8) -> String {
        let name = ERROR_CODES.get(usize::from(code)).unwrap_or(&"unknown");
        format!("{name}: wasi:filesystem error-code {code}")
    }

    /// A canonical-ABI return area: `result<_, error-code>`, the payload at 4.
    #[repr(C, align(8))]
    pub struct Ret(pub [u8; 16]);

    impl Ret {
        pub fn word(&self, at: usize) -> u32 {
            let bytes = &self.0[at..at + 4];
            u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
        }
    }

    /// The preopened directories: (handle, guest path).
    pub fn preopens() -> Vec<(i32, String)> {
        let mut ret = Ret([0; 16]);
        // SAFETY: the return area is 8 bytes (a list's pointer and length),
        // aligned to 4, which `Ret` is.
        unsafe { get_directories(ret.0.as_mut_ptr()) };
        let (list, len) = (ret.word(0) as usize, ret.word(4) as usize);
        (0..len)
            .map(|i| {
                // SAFETY: the host wrote `len` elements of 12 bytes each
                // (handle, string pointer, string length) at `list`, in
                // memory allocated for us and never freed.
                unsafe {
                    let element = (list + 12 * i) as *const u32;
                    let handle = element.read() as i32;
                    let name = std::slice::from_raw_parts(
                        element.add(1).read() as usize as *const u8,
                        element.add(2).read() as usize,
                    );
                    (handle, String::from_utf8_lossy(name).into_owned())
                }
            })
            .collect()
    }

    /// `open-at` on `dir`: a new handle, or the error code.
    pub fn open(dir: i32, path_flags: i32, path: &str, open_flags: i32) -> Result<i32, u8> {
        let mut ret = Ret([0; 16]);
        // SAFETY: `path` outlives the call; the return area is 8 bytes
        // (discriminant, then a handle or an error code at 4).
        unsafe {
            open_at(
                dir,
                path_flags,
                path.as_ptr(),
                path.len(),
                open_flags,
                READ,
                ret.0.as_mut_ptr(),
            )
        };
        match ret.0[0] {
            0 => Ok(ret.word(4) as i32),
            _ => Err(ret.0[4]),
        }
    }

    /// Up to 4 KiB of `file` from its start.
    pub fn read_start(file: i32) -> Result<Vec<u8>, u8> {
        let mut ret = Ret([0; 16]);
        // SAFETY: the return area is 16 bytes (discriminant, then a list's
        // pointer and length and a bool, or an error code, at 4).
        unsafe { read(file, 4096, 0, ret.0.as_mut_ptr()) };
        match ret.0[0] {
            0 => {
                let (ptr, len) = (ret.word(4) as usize, ret.word(8) as usize);
                // SAFETY: the host wrote `len` bytes at `ptr`, ours to keep.
                Ok(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }.to_vec())
            }
            _ => Err(ret.0[4]),
        }
    }
}

/// Reads `paths` relative to the preopen named `dir` by `open-at` itself.
fn raw_read(dir: &str, paths: &[String]) {
    let Some((handle, _)) = wasi::preopens().into_iter().find(|(_, name)| name == dir) else {
        println!("raw-read {dir}: error NotFound: no such preopened directory");
        return;
    };
    for path in paths {
        let read = wasi::open(handle, wasi::SYMLINK_FOLLOW, path, 0).and_then(|file| {
            let read = wasi::read_start(file);
            // SAFETY: `file` is ours, and used no more.
            unsafe { wasi::drop_descriptor(file) };
            read
        });
        match read {
            Ok(bytes) => println!("raw-read {dir} {path:?}: ok {}", shown(&bytes)),
            Err(code) => println!("raw-read {dir} {path:?}: error {}", wasi::error(code)),
        }
    }
}

/// Opens out-of-bounds paths on every preopened directory with
/// wasi:filesystem's own calls, following symlinks and not.
fn direct(host: Option<&str>) {
    let mut paths = vec![
        "/etc/passwd".to_owned(),
        "/proc/self/environ".to_owned(),
        "..".to_owned(),
        "../secret".to_owned(),
        "./../secret".to_owned(),
        "up/secret".to_owned(),
        "root/etc/passwd".to_owned(),
        "p/self/environ".to_owned(),
        "made-up".to_owned(),
    ];
    if let Some(host) = host {
        paths.push(format!("{host}/secret"));
        paths.push(format!("root{host}/secret"));
    }
    for (dir, name) in wasi::preopens() {
        for path in &paths {
            for (follow, flags) in [("follow", wasi::SYMLINK_FOLLOW), ("nofollow", 0)] {
                let attempt = format!("open-at {name} {path:?} {follow}");
                let opened = match wasi::open(dir, flags, path, 0) {
                    Ok(file) => {
                        let read = wasi::read_start(file);
                        // SAFETY: `file` is ours, and used no more.
                        unsafe { wasi::drop_descriptor(file) };
                        read.map(|bytes| shown(&bytes)).or_else(|code| {
                            match wasi::open(dir, flags, path, wasi::DIRECTORY) {
                                Ok(d) => {
                                    // SAFETY: as above.
                                    unsafe { wasi::drop_descriptor(d) };
                                    Ok("opened a directory".to_owned())
                                }
                                Err(_) => Ok(format!("opened; reading: {}", wasi::error(code))),
                            }
                        })
                    }
                    Err(code) => Err(code),
                };
                match opened {
                    Ok(what) => println!("{attempt}: ok {what}"),
                    Err(code) => println!("{attempt}: error {}", wasi::error(code)),
                }
            }
        }
    }
}
