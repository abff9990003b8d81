//! `offload-bench`: the offload benchmark and CUDA correctness check
//! (`offload_sched_bench::run_command`); `offload-bench dag`: the task-DAG benchmark;
//! `offload-bench linalg`: tiled Cholesky and GEMM against StarPU and the vendor routines.
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "offload-bench",
    about = "saxpy-regions benchmark (sync policies vs hand-written, PyTorch, libomptarget); `dag`: task DAGs vs LLVM 19; `linalg`: tiled Cholesky / GEMM vs StarPU and LAPACK / cuSOLVER / cuBLAS"
)]
struct Cli {
    #[command(flatten)]
    args: offload_sched_bench::BenchCommand,
}

fn main() {
    // 32 hardware queues per device before any thread or CUDA call (the library leaves
    // the process environment to its application); baselines run as child processes get
    // the user's environment back (the bench's `external::baseline_env`).
    #[cfg(feature = "cuda")]
    offload_sched::plugin::cuda::driver::raise_device_connections();
    let cli = Cli::parse();
    match offload_sched_bench::run_command(&cli.args) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("offload-bench: {e}");
            std::process::exit(1);
        }
    }
}
