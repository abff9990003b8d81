//! Backends by name: [`open`] makes the plugin a name stands for (`host`, `cuda`,
//! `cuda-timing`, `auto`, `null`: [`NAMES`]), the one lookup the CLI's `--plugin` and
//! the benches' use, so their lists, suggestions and errors are the same.

use super::host::{HostPlugin, HostPluginOptions};
use super::null::NullPlugin;
use super::Plugin;
use std::path::PathBuf;
use thiserror::Error;

/// The backend names [`open`] takes, in the order messages and `--help` list them.
pub const NAMES: [&str; 5] = ["host", "cuda", "cuda-timing", "auto", "null"];

/// A backend [`open`] makes, by name ([`Backend::name`], [`NAMES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// `host`: [`HostPlugin`], always built.
    Host,
    /// `cuda`: the CUDA plugin (feature `cuda`).
    Cuda,
    /// `cuda-timing`: the CUDA plugin with option `timing` (every kernel, engine copy and
    /// copy batch timed: what `run --trace` uses), to measure what tracing costs.
    CudaTiming,
    /// `auto`: `cuda` if a CUDA driver and device answer ([`super::cuda::probe`]), else
    /// `host`.
    Auto,
    /// `null`: [`NullPlugin`], no device work (the executor's own cost).
    Null,
}

impl Backend {
    /// Every backend, in the order of [`NAMES`].
    pub const ALL: [Backend; 5] = [
        Backend::Host,
        Backend::Cuda,
        Backend::CudaTiming,
        Backend::Auto,
        Backend::Null,
    ];

    /// Its name: `host`, `cuda`, `cuda-timing`, `auto` or `null`.
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// The backend named `name` (exactly, as [`NAMES`] spells it).
    ///
    /// Errors: [`LookupError::Unknown`], with the closest name when one is close
    /// (`crate::suggest::did_you_mean`).
    pub fn from_name(name: &str) -> Result<Backend, LookupError> {
        match NAMES.iter().position(|n| *n == name) {
            Some(i) => Ok(Backend::ALL[i]),
            None => Err(LookupError::Unknown {
                name: name.to_string(),
                suggestion: crate::suggest::did_you_mean(name, NAMES),
            }),
        }
    }

    /// Whether it is the CUDA plugin (`cuda` or `cuda-timing`).
    pub fn is_cuda(self) -> bool {
        matches!(self, Backend::Cuda | Backend::CudaTiming)
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Backend {
    type Err = LookupError;

    fn from_str(s: &str) -> Result<Backend, LookupError> {
        Backend::from_name(s)
    }
}

/// Options of [`open`]; each applies to the backends that have it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Host plugin: the number of emulated devices (0 counts as 1). The CUDA plugin has
    /// every device the driver lists; the null plugin one.
    pub devices: u32,
    /// Host plugin: sleep 0-200 µs before every stream op, from this seed
    /// ([`HostPluginOptions::delay_jitter`]).
    pub delay_jitter: Option<u64>,
    /// The folder relative user-kernel paths resolve against (the graph file's folder):
    /// the host plugin's `library_dir`, the CUDA plugin's `kernel_dir`. The current
    /// directory when `None`.
    pub kernel_dir: Option<PathBuf>,
    /// CUDA plugin: time kernels and copies (for `--trace`), as `cuda-timing` always
    /// does. The host plugin always times; the null plugin never.
    pub timing: bool,
    /// Host plugin: the device memory cap, bytes per device
    /// ([`HostPluginOptions::device_memory`]; `None`: unlimited). The CUDA plugin has
    /// the device's own memory.
    pub device_memory: Option<u64>,
}

/// What [`open`] made.
#[non_exhaustive]
pub struct Opened {
    /// The plugin.
    pub plugin: Box<dyn Plugin>,
    /// The backend it is: the one named, or for `auto` the one chosen ([`Backend::Cuda`]
    /// or [`Backend::Host`]).
    pub backend: Backend,
    /// For `auto` that chose the host plugin: why the CUDA plugin could not be opened
    /// (the error `cuda` gives), for a caller to say so (e.g. `note: …; using the host
    /// plugin`).
    pub fallback: Option<LookupError>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("plugin", &self.plugin.info().name)
            .field("backend", &self.backend)
            .field("fallback", &self.fallback)
            .finish()
    }
}

/// Why [`open`] made no plugin. Each message is one line.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LookupError {
    /// A name that is not one of [`NAMES`]; `suggestion` is the closest one where one is
    /// close. Message: `unknown plugin "hots" (host, cuda, cuda-timing, auto, null); did
    /// you mean `host`?`.
    #[error(
        "unknown plugin \"{name}\" ({}){}",
        NAMES.join(", "),
        suggestion.map(|s| format!("; did you mean `{s}`?")).unwrap_or_default()
    )]
    Unknown {
        name: String,
        suggestion: Option<&'static str>,
    },
    /// `cuda` or `cuda-timing` in a build without the `cuda` feature.
    #[error("no CUDA plugin: this binary was built without the `cuda` feature")]
    NoCudaFeature,
    /// The CUDA plugin could not be opened: no driver library, no device, or a failing
    /// driver call, in the driver's one-line words ([`super::cuda::probe`]).
    #[error("{0}")]
    Cuda(String),
}

/// The plugin named `name` ([`NAMES`]) with `opts`. `auto` opens the CUDA plugin when a
/// driver and a device answer ([`super::cuda::probe`]) and the host plugin otherwise,
/// with the reason in [`Opened::fallback`] (it never fails). Opening the CUDA plugin
/// retains each device's primary context (see `CudaPlugin::new`); the others start no
/// thread until streams are created.
///
/// Errors: [`LookupError::Unknown`] for a name not in [`NAMES`] (with a did-you-mean);
/// for `cuda` and `cuda-timing`, [`LookupError::NoCudaFeature`] in a build without the
/// `cuda` feature and [`LookupError::Cuda`] where no driver or device answers.
pub fn open(name: &str, opts: &OpenOptions) -> Result<Opened, LookupError> {
    let opened = |plugin, backend| Opened {
        plugin,
        backend,
        fallback: None,
    };
    match Backend::from_name(name)? {
        Backend::Host => Ok(opened(host(opts), Backend::Host)),
        Backend::Null => Ok(opened(Box::<NullPlugin>::default(), Backend::Null)),
        b @ (Backend::Cuda | Backend::CudaTiming) => {
            let timing = opts.timing || b == Backend::CudaTiming;
            Ok(opened(cuda(opts, timing)?, b))
        }
        Backend::Auto => match cuda(opts, opts.timing) {
            Ok(p) => Ok(opened(p, Backend::Cuda)),
            Err(why) => Ok(Opened {
                fallback: Some(why),
                ..opened(host(opts), Backend::Host)
            }),
        },
    }
}

fn host(opts: &OpenOptions) -> Box<dyn Plugin> {
    Box::new(HostPlugin::new(HostPluginOptions {
        devices: opts.devices.max(1),
        delay_jitter: opts.delay_jitter,
        library_dir: opts.kernel_dir.clone(),
        device_memory: opts.device_memory,
        ..HostPluginOptions::default()
    }))
}

#[cfg(feature = "cuda")]
fn cuda(opts: &OpenOptions, timing: bool) -> Result<Box<dyn Plugin>, LookupError> {
    use super::cuda::{probe, CudaPlugin, CudaPluginOptions};
    probe().map_err(LookupError::Cuda)?;
    let p = CudaPlugin::new(CudaPluginOptions {
        kernel_dir: opts.kernel_dir.clone(),
        timing,
        ..CudaPluginOptions::default()
    })
    .map_err(LookupError::Cuda)?;
    Ok(Box::new(p))
}

#[cfg(not(feature = "cuda"))]
fn cuda(_opts: &OpenOptions, _timing: bool) -> Result<Box<dyn Plugin>, LookupError> {
    Err(LookupError::NoCudaFeature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_an_unknown_one_gets_the_list_and_a_suggestion() {
        for b in Backend::ALL {
            assert_eq!(Backend::from_name(b.name()), Ok(b));
            assert_eq!(b.to_string().parse::<Backend>(), Ok(b));
        }
        let err = |name: &str| open(name, &OpenOptions::default()).unwrap_err().to_string();
        assert_eq!(
            err("hots"),
            "unknown plugin \"hots\" (host, cuda, cuda-timing, auto, null); did you mean `host`?"
        );
        assert_eq!(
            err("tpu"),
            "unknown plugin \"tpu\" (host, cuda, cuda-timing, auto, null)"
        );
    }

    #[test]
    fn each_backend_opens_with_its_options() {
        let o = |name: &str, opts: &OpenOptions| open(name, opts).unwrap();
        let host = o(
            "host",
            &OpenOptions {
                devices: 3,
                ..OpenOptions::default()
            },
        );
        assert_eq!(host.backend, Backend::Host);
        assert_eq!(host.plugin.info().devices, 3);
        assert!(host.fallback.is_none());
        assert_eq!(o("host", &OpenOptions::default()).plugin.info().devices, 1);
        let null = o("null", &OpenOptions::default());
        assert_eq!(
            (null.backend, null.plugin.info().computes),
            (Backend::Null, false)
        );
        // `auto` always opens something: CUDA, or the host plugin saying why not.
        let auto = o("auto", &OpenOptions::default());
        match auto.backend {
            Backend::Cuda => assert!(auto.fallback.is_none()),
            b => {
                assert_eq!(b, Backend::Host);
                let why = auto.fallback.expect("the reason CUDA was not opened");
                assert!(!why.to_string().contains('\n'), "{why}");
            }
        }
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_so() {
        for name in ["cuda", "cuda-timing"] {
            let e = open(name, &OpenOptions::default()).unwrap_err();
            assert_eq!(e, LookupError::NoCudaFeature);
            assert_eq!(
                e.to_string(),
                "no CUDA plugin: this binary was built without the `cuda` feature"
            );
        }
    }
}
