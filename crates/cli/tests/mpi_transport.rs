//! `distribute::mpi::MpiTransport` on 2 MPI ranks: each test runs this test binary again
//! under `mpirun -np 2` (the child runs the same test with `MPI_TRANSPORT_CHILD` set, as
//! one rank) and reads what the ranks print. Skipped with a message where there is no
//! `mpirun` (scripts/setup.sh installs Debian's openmpi-bin).
#![cfg(feature = "mpi")]

use offload_sched::distribute::mpi::{Mode, MpiTransport};
use offload_sched::distribute::{Envelope, Transport, TransportError};
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD: &str = "MPI_TRANSPORT_CHILD";

/// In the parent: runs `test` of this binary on 2 ranks and returns their stdout, or
/// `None` (skipped) without mpirun. In a child: `None`, and the caller runs the rank.
fn on_two_ranks(test: &str) -> Option<String> {
    if std::env::var_os(CHILD).is_some() {
        return None;
    }
    if Command::new("mpirun").arg("--version").output().is_err() {
        eprintln!("skipped: no mpirun (scripts/setup.sh installs Debian's openmpi-bin)");
        return Some(String::new());
    }
    let out = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            "2",
            "-x",
            CHILD,
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("OMPI_MCA_btl", "self,vader")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    Some(text)
}

fn env(from: u32, to: u32, seq: u64) -> Envelope {
    Envelope { from, to, seq }
}

/// The progress thread takes no data message here (`Mode::DirectOnly`): every receive
/// completes only because it takes its own message (`MPI_Improbe` + `MPI_Mrecv`), and
/// every send is posted by the calling thread (the 256 KiB one above the eager limit is
/// completed by the progress thread). Out of order: the later message is received first.
#[test]
fn receives_take_their_own_messages_without_the_progress_thread() {
    if let Some(out) = on_two_ranks("receives_take_their_own_messages_without_the_progress_thread")
    {
        if out.is_empty() {
            return;
        }
        for r in 0..2 {
            assert!(
                out.contains(&format!(
                    "rank {r}: received 3 B and 262144 B from rank {}",
                    1 - r
                )),
                "{out}"
            );
        }
        return;
    }
    let t = MpiTransport::start_with(Duration::from_secs(20), Mode::DirectOnly).unwrap();
    let (me, other) = (t.rank(), 1 - t.rank());
    t.reserve(1);
    let big: Vec<u8> = (0..262_144u32)
        .map(|i| (i % 251) as u8 ^ me as u8)
        .collect();
    t.send(env(me, other, 0), vec![me as u8 + 1; 3]).unwrap();
    t.send(env(me, other, 1), big).unwrap();
    let got_big = t.recv(env(other, me, 1), 262_144, &|| false).unwrap();
    let got = t.recv(env(other, me, 0), 3, &|| false).unwrap();
    assert_eq!(got, vec![other as u8 + 1; 3]);
    assert!(got_big
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (i as u32 % 251) as u8 ^ other as u8));
    println!(
        "rank {me}: received {} B and {} B from rank {other}",
        got.len(),
        got_big.len()
    );
    t.finish();
}

/// A receive that polls for its own message still ends as soon as another rank aborts
/// (long before the 600 s progress timeout), naming that rank and its message.
#[test]
fn an_abort_ends_a_polling_receive_on_the_other_rank() {
    if let Some(out) = on_two_ranks("an_abort_ends_a_polling_receive_on_the_other_rank") {
        if out.is_empty() {
            return;
        }
        // The harness's own lines share the ranks' stdout: the line is read from its
        // start, wherever it is.
        let at = out
            .find("rank 0: aborted by rank 1 ")
            .unwrap_or_else(|| panic!("{out}"));
        let line = out[at..].lines().next().unwrap();
        assert!(line.contains("(\"op #7 failed\") after "), "{out}");
        let ms: f64 = line.rsplit(' ').nth(1).unwrap().parse().unwrap();
        assert!(ms < 10_000.0, "{out}");
        return;
    }
    let t = MpiTransport::start_with(Duration::from_secs(600), Mode::Direct).unwrap();
    t.reserve(1);
    if t.rank() == 1 {
        std::thread::sleep(Duration::from_millis(300));
        t.abort("op #7 failed");
        // Rank 0 prints before this rank exits (an exit without MPI_Finalize ends the job).
        std::thread::sleep(Duration::from_secs(3));
        std::process::exit(0);
    }
    let at = Instant::now();
    match t.recv(env(1, 0, 0), 8, &|| false) {
        Err(TransportError::Aborted { rank, message }) => {
            println!(
                "rank 0: aborted by rank {rank} ({message:?}) after {:.0} ms",
                at.elapsed().as_secs_f64() * 1e3
            );
        }
        other => println!("rank 0: {other:?}"),
    }
    std::process::exit(0);
}
