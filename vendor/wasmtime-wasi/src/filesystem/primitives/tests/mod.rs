#[macro_use]
mod sys_common;

mod helpers;

mod cap_basics;
mod file_type_ext;
mod fs;
mod fs_additional;
mod metadata_ext;
mod paths_containing_nul;
mod rename;
mod rename_directory;
mod reopendir;
mod set_times;
mod symlinks;
mod windows_open;
mod windows_symlinks;
