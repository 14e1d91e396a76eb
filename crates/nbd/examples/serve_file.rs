//! Serves one file or block device over NBD until killed; used by benches/vs_nbdkit.sh
//! and handy for poking the server with real clients:
//!
//!     cargo run --release -p reblock-nbd --example serve_file -- disk.img --unix /tmp/d.sock
//!     nbdinfo 'nbd+unix:///?socket=/tmp/d.sock'
//!
//! Flags: `--unix PATH` or `--tcp ADDR:PORT` (default 127.0.0.1:10809), `--read-only`,
//! `--workers N` (requests in flight per connection), `--name NAME` (export name).

use std::sync::Arc;

use reblock_nbd::{ExportSet, FileExport, Listen, Server, ServerConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut listen = Listen::tcp_loopback(reblock_nbd::server::DEFAULT_TCP_PORT);
    let mut read_only = false;
    let mut name = String::new();
    let mut config = ServerConfig::default();
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a}: missing value"));
        match a.as_str() {
            "--unix" => listen = Listen::Unix(value()?.into()),
            "--tcp" => listen = Listen::Tcp(value()?.parse()?),
            "--read-only" => read_only = true,
            "--workers" => config.workers_per_connection = value()?.parse()?,
            "--name" => name = value()?,
            _ if file.is_none() && !a.starts_with("--") => file = Some(a),
            _ => return Err(format!("unexpected argument {a:?}").into()),
        }
    }
    let file = file.ok_or("usage: serve_file FILE [--unix PATH | --tcp ADDR] [--read-only]")?;
    let export = Arc::new(FileExport::open(file.as_ref(), read_only)?);
    let server = Server::bind(&listen, ExportSet::single(&name, export)?, config)?;
    eprintln!("serving {file} at {}", server.endpoint().uri(&name));
    let _running = server.start()?;
    loop {
        std::thread::park();
    }
}
