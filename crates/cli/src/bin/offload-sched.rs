fn main() -> std::process::ExitCode {
    // 32 hardware queues per device for schedules of more than 8 streams, set before any
    // thread or CUDA call (the library leaves the process environment to its application).
    #[cfg(feature = "cuda")]
    offload_sched::plugin::cuda::driver::raise_device_connections();
    offload_sched_cli::main()
}
