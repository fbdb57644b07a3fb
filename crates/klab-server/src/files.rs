//! Private files of the data directory: the directory is 0700, and every file klab writes there
//! (keys, certificates, kubeconfig, the timeline, the store) is 0600 from the moment it exists —
//! written to a temporary file created 0600, synced, renamed over the target and the directory
//! synced, so a crash leaves the old or the new content, never a torn or world-readable one.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};

/// Creates `dir` (and missing parents) with mode 0700, and tightens an existing one to 0700.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    b.mode(0o700);
    b.create(dir)?;
    #[cfg(unix)]
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    Ok(())
}

fn private_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true);
    #[cfg(unix)]
    o.mode(0o600);
    o
}

/// Creates `path` empty with mode 0600 if it does not exist (for files another library fills,
/// like the store), and tightens an existing one to 0600.
pub fn private_file(path: &Path) -> std::io::Result<()> {
    private_options().create(true).truncate(false).open(path)?;
    #[cfg(unix)]
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// Writes `contents` to `path` atomically and durably, mode 0600.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = private_options().create(true).truncate(true).open(&tmp)?;
        #[cfg(unix)]
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(contents)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename is durable once the directory entry is.
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn files_and_dirs_are_private_from_the_start() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("data/pki");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let f = dir.join("ca.key");
        write_private(&f, b"secret").unwrap();
        assert_eq!(mode(&f), 0o600);
        assert_eq!(fs::read(&f).unwrap(), b"secret");
        // An existing world-readable file is replaced by a private one.
        let g = dir.join("kubeconfig");
        fs::write(&g, "old").unwrap();
        fs::set_permissions(&g, fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&g, b"new").unwrap();
        assert_eq!(
            (mode(&g), fs::read_to_string(&g).unwrap().as_str()),
            (0o600, "new")
        );
        let s = dir.join("store.redb");
        private_file(&s).unwrap();
        assert_eq!(mode(&s), 0o600);
        // No temporary files are left behind.
        let names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
    }
}
