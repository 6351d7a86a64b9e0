//! A scripted perf for tests: it records every counting request, and its events read what a
//! script says.

use std::io;
use std::sync::{Arc, Mutex};

use super::lock;
use super::perf::{CounterRequest, CountingEvent, CountingEvents, Reading};

/// What a scripted event reads: from its request and how many reads it had before.
pub(crate) type Script = dyn Fn(&CounterRequest, usize) -> io::Result<Reading> + Send + Sync;

/// perf as a script: records every request, and its events read what the script says.
pub(crate) struct ScriptedPerf {
    pub(crate) opened: Arc<Mutex<Vec<CounterRequest>>>,
    pub(crate) script: Arc<Script>,
}

struct ScriptedEvent {
    request: CounterRequest,
    reads: usize,
    script: Arc<Script>,
}

impl CountingEvents for ScriptedPerf {
    fn open(&self, request: &CounterRequest) -> io::Result<Box<dyn CountingEvent>> {
        lock(&self.opened).push(*request);
        Ok(Box::new(ScriptedEvent { request: *request, reads: 0, script: self.script.clone() }))
    }
}

impl CountingEvent for ScriptedEvent {
    fn enable(&mut self, _on: bool) -> io::Result<()> {
        Ok(())
    }

    fn read(&mut self) -> io::Result<Reading> {
        self.reads += 1;
        (self.script)(&self.request, self.reads - 1)
    }
}
