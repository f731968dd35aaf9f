//! Starting a trace: the backend the spec names runs the program on a thread of its own, which
//! feeds the reader returned.

use super::{channel, qemu, valgrind, Backend, ChannelReader, TraceSpec, TracerError};

/// Starts tracing `spec.command`; the program runs (its standard streams are xlat's) while the
/// returned reader yields its records.
pub fn spawn(spec: &TraceSpec) -> Result<ChannelReader, TracerError> {
    if spec.command.is_empty() {
        return Err(TracerError::Command("no command to trace: give it after `--`".to_string()));
    }
    let (sink, mut reader) = channel();
    let outcome = reader.outcome.clone();
    reader.thread = Some(match spec.backend {
        Backend::Qemu => qemu::start(spec, sink, outcome)?,
        Backend::Lackey => valgrind::start(spec, sink, outcome)?,
    });
    Ok(reader)
}
