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
    let cli = Cli::parse();
    match offload_sched_bench::run_command(&cli.args) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("offload-bench: {e}");
            std::process::exit(1);
        }
    }
}
