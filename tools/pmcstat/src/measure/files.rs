//! The files a run creates, put in place when the measurement starts.

use crate::failure::{Failure, io_failure};
use crate::outputs::Output;

/// The files a run writes. The `-o` and `-O` files are written as temporary files until the
/// measurement starts ([`crate::outputs`]): a run that fails before then leaves no stub log or
/// empty output behind, and a file that was at the path keeps its content. The temporary log
/// is removed whenever the run ends.
#[derive(Default)]
pub(super) struct NewFiles {
    /// Put in place by [`NewFiles::measuring`]; dropped before, they leave nothing behind.
    pub(super) outputs: Vec<Output>,
    /// Removed at the end of the run, however it ends.
    pub(super) temporary: Vec<tempfile::TempPath>,
}

impl NewFiles {
    /// The measurement starts: the outputs replace what their paths held.
    pub(super) fn measuring(&mut self) -> Result<(), Failure> {
        for output in self.outputs.drain(..) {
            output.commit().map_err(|e| io_failure("cannot put the output files in place", &e))?;
        }
        Ok(())
    }
}
