//! Files named on a command line are opened only if they are regular files: a FIFO,
//! a device or a socket given as a profile, a report, a trace or a fleet config would
//! block the verb or feed it without end.

use std::path::Path;

/// Opens `path` for reading only if it is a regular file; `what` names the file in the
/// error (`"a profile"`). A FIFO, a device or a socket
/// is refused before it is opened (opening a FIFO for reading blocks until a writer
/// appears, out of reach of any signal handling); the opened file is checked again, so
/// that a path swapped in between is refused too.
pub fn open_regular(path: &Path, what: &str) -> std::io::Result<std::fs::File> {
    let not_regular = |ft: std::fs::FileType| {
        let kind = file_type_name(ft);
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({kind}): {what} is read from a regular file"),
        )
    };
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    Ok(file)
}

/// What kind of non-regular file `ft` is, in words.
fn file_type_name(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_char_device() || ft.is_block_device() {
            return "a device";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// Reads the whole of `path` as text, only if it is a regular file.
pub fn read_regular_to_string(path: &Path, what: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    open_regular(path, what)?.read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("regular-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("path");
        // SAFETY: mkfifo reads a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular_to_string(&fifo, "a report").expect_err("refused");
        assert!(e.to_string().contains("a FIFO"), "{e}");
        assert!(e.to_string().contains("a report"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
