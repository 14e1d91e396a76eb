//! Opening a backing image for serving: exclusive lock, superblock discovery, and
//! formatting on first use without ever formatting over an existing superblock.

use crate::format::{FormatError, Layout, LayoutRequest};
use crate::meta::{self, MetaError};
use crate::store::{file_len, FileStore, Store};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to find or make the BOPT.
#[derive(Clone, Debug)]
pub struct ImageOptions {
    pub image: PathBuf,
    pub bopt_device: Option<PathBuf>,
    pub read_only: bool,
    /// BOPT budget for formatting a fresh image; `None`: the image must be formatted.
    pub bopt_bytes: Option<u64>,
    pub page_bytes: u32,
    pub segment_pages: u32,
    pub write_buffer_fraction: f64,
    /// Allow formatting a BOPT onto an image or BOPT device that already holds data (a
    /// block device gives up its last `bopt_bytes`). Without it only fresh files (created
    /// by this call, or empty) are formatted automatically.
    pub format: bool,
    /// Create the image with this many data bytes if it does not exist.
    pub create_bytes: Option<u64>,
}

/// Why an image could not be opened (or formatted) for serving. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: in use by another reblock process (it holds the image's lock)", path.display())]
    InUse { path: PathBuf },
    #[error("{}: flock: {source}", path.display())]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Meta {
        path: PathBuf,
        source: Box<MetaError>,
    },
    #[error(
        "{}: an existing image with no reblock superblock{}. If it was served \
         with a separate BOPT device, pass that device with --bopt-device: formatting a \
         new BOPT would hide the pages the old one holds, flushed writes included. If it \
         is a plain image (or disk) to start caching, pass --format to format a new BOPT \
         (the data area keeps its bytes)",
        path.display(),
        match bopt_device {
            Some(p) => format!(" (the BOPT device given, {}, has none either)", p.display()),
            None => String::new(),
        }
    )]
    ExistingData {
        path: PathBuf,
        bopt_device: Option<PathBuf>,
    },
    #[error(
        "{}: the BOPT device is not empty and has no reblock superblock; is it the right \
         device? Pass --format to overwrite it with a new BOPT",
        path.display()
    )]
    BoptDeviceNotEmpty { path: PathBuf },
    #[error(
        "{}: no reblock superblock found; pass --bopt-size SIZE{} to format one (or --bopt-device DEV if its BOPT lives on a separate device)",
        path.display(),
        // Without it the next attempt meets ExistingData: say both steps at once.
        if *holds_data { " --format (the image holds data; its bytes stay as the data area)" } else { "" }
    )]
    NotFormatted { path: PathBuf, holds_data: bool },
    #[error("{}: not formatted, and --read-only forbids formatting", path.display())]
    ReadOnlyUnformatted { path: PathBuf },
    #[error(
        "{}: a block device without a superblock; formatting overwrites its last {bopt_bytes} bytes: pass --format to confirm",
        path.display()
    )]
    BlockDeviceUnconfirmed { path: PathBuf, bopt_bytes: u64 },
    #[error("{}: {source}", path.display())]
    Layout { path: PathBuf, source: FormatError },
    #[error("{}: {len} bytes is too small for the BOPT ({needed} bytes)", path.display())]
    BoptDeviceTooSmall {
        path: PathBuf,
        len: u64,
        needed: u64,
    },
    #[error("{}: format: {source}", path.display())]
    Format {
        path: PathBuf,
        source: Box<MetaError>,
    },
}

/// An [`ImageError::Io`] naming `path`.
fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What opening did.
#[derive(Clone, Debug)]
pub struct Opened {
    pub store: Arc<FileStore>,
    /// Set when this call formatted the BOPT.
    pub formatted: Option<Layout>,
}

fn open_file(path: &Path, read_only: bool, create: bool) -> Result<File, ImageError> {
    OpenOptions::new()
        .read(true)
        .write(!read_only)
        .create(create && !read_only)
        .truncate(false)
        .open(path)
        .map_err(io_at(path))
}

/// Takes an exclusive, non-blocking flock: a second `serve` on the same image is refused.
pub fn lock_exclusive(f: &File, path: &Path) -> Result<(), ImageError> {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Err(ImageError::InUse {
            path: path.to_path_buf(),
        });
    }
    Err(ImageError::Lock {
        path: path.to_path_buf(),
        source: e,
    })
}

fn is_block(f: &File) -> bool {
    f.metadata()
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false)
}

/// True when `f` is empty. Holes do not make a file fresh: an image served with a
/// separate BOPT device may still be all holes when every write went to that device.
fn is_empty(f: &File) -> bool {
    !is_block(f) && f.metadata().is_ok_and(|m| m.len() == 0)
}

pub fn open_image(o: &ImageOptions) -> Result<Opened, ImageError> {
    let create = o.create_bytes.is_some() && !o.image.exists();
    let data = open_file(&o.image, o.read_only, create)?;
    lock_exclusive(&data, &o.image)?;
    if create {
        data.set_len(o.create_bytes.unwrap_or(0))
            .map_err(io_at(&o.image))?;
    }
    let fresh_image = create || is_empty(&data);
    let mut fresh_bopt = true;
    let bopt = match &o.bopt_device {
        Some(p) => {
            let f = open_file(p, o.read_only, o.bopt_bytes.is_some())?;
            lock_exclusive(&f, p)?;
            fresh_bopt = is_empty(&f);
            Some(f)
        }
        None => None,
    };
    let store = Arc::new(FileStore::new(data, bopt));
    match meta::read_superblock(store.as_ref()) {
        Ok(_) => Ok(Opened {
            store,
            formatted: None,
        }),
        Err(MetaError::NotFormatted) if o.bopt_bytes.is_none() => Err(ImageError::NotFormatted {
            path: o.image.clone(),
            holds_data: !fresh_image && o.bopt_device.is_none(),
        }),
        Err(MetaError::NotFormatted) => {
            refuse_formatting_data(o, fresh_image, fresh_bopt)?;
            format_fresh(o, store)
        }
        Err(source) => Err(ImageError::Meta {
            path: o.bopt_device.as_ref().unwrap_or(&o.image).clone(),
            source: Box::new(source),
        }),
    }
}

/// Formatting a BOPT onto an existing image is what happens when an
/// operator forgets `--bopt-device`: the new, empty BOPT hides every page the real one
/// held, flushed writes included. So it takes `--format` (or a fresh file).
fn refuse_formatting_data(
    o: &ImageOptions,
    fresh_image: bool,
    fresh_bopt: bool,
) -> Result<(), ImageError> {
    if o.format || o.bopt_bytes.is_none() || o.read_only {
        return Ok(()); // format_fresh reports the other refusals
    }
    if !fresh_image {
        return Err(ImageError::ExistingData {
            path: o.image.clone(),
            bopt_device: o.bopt_device.clone(),
        });
    }
    if let (Some(p), false) = (&o.bopt_device, fresh_bopt) {
        return Err(ImageError::BoptDeviceNotEmpty { path: p.clone() });
    }
    Ok(())
}

fn format_fresh(o: &ImageOptions, store: Arc<FileStore>) -> Result<Opened, ImageError> {
    let name = &o.image;
    let Some(bopt_bytes) = o.bopt_bytes else {
        return Err(ImageError::NotFormatted {
            path: name.clone(),
            holds_data: false,
        });
    };
    if o.read_only {
        return Err(ImageError::ReadOnlyUnformatted { path: name.clone() });
    }
    let data_file = OpenOptions::new()
        .read(true)
        .open(name)
        .map_err(io_at(name))?;
    let image_len = file_len(&data_file).map_err(io_at(name))?;
    let separate = o.bopt_device.is_some();
    let block = is_block(&data_file);
    if block && !separate && !o.format {
        return Err(ImageError::BlockDeviceUnconfirmed {
            path: name.clone(),
            bopt_bytes,
        });
    }
    // A file keeps its bytes as the data area and grows by the BOPT; a block device gives
    // up its end to it.
    let data_bytes = if block && !separate {
        image_len.saturating_sub(bopt_bytes) / u64::from(o.page_bytes) * u64::from(o.page_bytes)
    } else {
        image_len
    };
    let mut layout = Layout::plan(&LayoutRequest {
        data_bytes,
        bopt_bytes,
        page_bytes: o.page_bytes,
        segment_pages: o.segment_pages,
        write_buffer_fraction: o.write_buffer_fraction,
        separate,
    })
    .map_err(|source| ImageError::Layout {
        path: name.clone(),
        source,
    })?;
    let bopt_path = o.bopt_device.as_ref().unwrap_or(&o.image);
    let bopt_file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(bopt_path)
        .map_err(io_at(bopt_path))?;
    if is_block(&bopt_file) {
        let len = file_len(&bopt_file).map_err(io_at(bopt_path))?;
        if len < layout.device_bytes {
            return Err(ImageError::BoptDeviceTooSmall {
                path: bopt_path.clone(),
                len,
                needed: layout.device_bytes,
            });
        }
        layout.device_bytes = len;
    } else {
        bopt_file
            .set_len(layout.device_bytes)
            .map_err(io_at(bopt_path))?;
    }
    let image_id = random_id();
    meta::format(store.as_ref() as &dyn Store, &layout, image_id).map_err(|source| {
        ImageError::Format {
            path: name.clone(),
            source: Box::new(source),
        }
    })?;
    tracing::info!(
        data_bytes,
        bopt_pages = layout.bopt_pages,
        "formatted a fresh BOPT"
    );
    Ok(Opened {
        store,
        formatted: Some(layout),
    })
}

fn random_id() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(f) = File::open("/dev/urandom") {
        use std::io::Read;
        let _ = (&f).read_exact(&mut b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    u64::from_le_bytes(b) ^ t ^ u64::from(std::process::id())
}
