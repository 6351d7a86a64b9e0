//! Workloads: small programs the simulated [`Machine`](crate::machine::Machine) runs, made of
//! functions and basic blocks whose every event is known in advance.
//!
//! A [`Program`] is a list of [`Function`]s; a function is a list of [`Block`]s laid out one after
//! the other in the address space. Each block has
//!
//! * an address range (`start`, `len`) and a [`Ring`] (user or kernel mode),
//! * a [`Work`]: the exact events of one execution (instructions, cycles, branches, …),
//! * a repeat count: the block's work runs `repeat` times in a row (a tight loop, retired by the
//!   PMU in O(1) however large the count), and
//! * a [`Flow`]: what happens after it — fall through to the next block, loop back to an earlier
//!   block of the same function, call a function, return, or a system [`Action`] (fork, exec,
//!   exit, create a thread, yield, sleep, or a test [`Hook`] such as "issue this PMC request now").
//!
//! Everything is deterministic: a thread's sequence of blocks depends only on its program, never
//! on the scheduler, so its ground truth is the same whatever the interleaving.
//!
//! Control flow in detail:
//!
//! * Running past the last block of a function returns from it, like [`Flow::Return`].
//! * [`Flow::Loop`] `{ to, times }` on block `b` makes blocks `to..=b` run `times` times in all
//!   (then execution falls through to `b + 1`). Loops nest: an inner loop starts afresh each time
//!   an outer loop re-enters it.
//! * [`Flow::Call`] pushes a frame; the return address is the end of the calling block
//!   (`start + len`), which is where execution resumes. [`Thread::stack`](crate::machine::Thread::stack)
//!   lists the return addresses of the frames at any moment.
//! * *Kernel functions* ([`ProgramBuilder::kernel_function`]) are laid out in kernel text from
//!   [`KERNEL_TEXT_BASE`] and run in kernel mode, with their frames on the thread's kernel stack.
//!   A user function enters one with [`Flow::Syscall`] (a system call); kernel functions call
//!   each other with [`Flow::Call`]; when the entered function returns, the thread returns to
//!   user mode after the system call block. A user function cannot call a kernel function, nor a
//!   kernel function a user one.
//! * When a thread returns from its entry function it exits; when the *main* thread (the first
//!   thread of a process, or the thread that executed a program) does so, the process exits, as
//!   when `main` returns in C. [`Action::ExitThread`] ends only the calling thread (the process
//!   exits with its last thread).
//!
//! Programs are built with [`ProgramBuilder`], which lays the blocks out in memory and resolves
//! function names:
//!
//! ```
//! use hwpmc_sim::pmu::{Ring, Work};
//! use hwpmc_sim::workload::ProgramBuilder;
//!
//! let work = Work { instructions: 100, core_cycles: 150, branches: 10, ..Work::default() };
//! let program = ProgramBuilder::new("/bin/example")
//!     .function("main", |f| {
//!         f.repeat(Ring::User, work.clone(), 1000) // 1000 executions in a row
//!             .call("helper")
//!             .loop_to(0, 5) // everything so far, 5 times
//!             .exit()
//!     })
//!     .function("helper", |f| f.block(Ring::Kernel, work.clone()))
//!     .build();
//! assert_eq!(program.function(program.entry()).name(), "main");
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

use crate::hook::HookContext;
use crate::kernel::Credentials;
use crate::pmu::{Ring, Work};

/// The index of a function in its [`Program`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunctionId(pub usize);

/// Code a test runs at a point of a workload, as the thread that reaches it (for example to issue
/// a PMC request "now", or to record the ground truth at that instant). It runs with the thread
/// on its CPU and cannot change the machine.
pub type Hook = Rc<dyn Fn(&HookContext<'_>)>;

/// A system action a block performs after its work.
#[derive(Clone)]
pub enum Action {
    /// `fork()`: a child process (same credentials, a copy of the memory) whose only thread runs
    /// function `child` of the same program on a fresh stack; the parent continues. The driver's
    /// fork hook runs before the child can run.
    Fork {
        /// What the child runs (its entry function; when it returns, the child exits).
        child: FunctionId,
    },
    /// `execve()`: the process's other threads exit, then this thread runs `program` from its
    /// entry. With `set_id`, the program is set-id: the process takes these credentials and is
    /// marked set-id before the driver's exec hook runs.
    Exec {
        /// The new program.
        program: Rc<Program>,
        /// The credentials a set-id program runs with, or `None` for an ordinary program.
        set_id: Option<Credentials>,
    },
    /// `exit()`: the whole process exits.
    Exit,
    /// `thr_exit()`: this thread exits (the process exits with its last thread).
    ExitThread,
    /// `thr_new()`: a new thread of this process runs function `entry` (it exits when that
    /// returns).
    SpawnThread {
        /// The new thread's entry function.
        entry: FunctionId,
    },
    /// `sched_yield()`: the thread gives up the rest of its quantum.
    Yield,
    /// The thread goes to sleep until [`Machine::wake`](crate::machine::Machine::wake).
    Sleep,
    /// A test hook, called as this thread.
    Hook(Hook),
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Fork { child } => f.debug_struct("Fork").field("child", child).finish(),
            Action::Exec { program, set_id } => f
                .debug_struct("Exec")
                .field("program", &program.path())
                .field("set_id", set_id)
                .finish(),
            Action::Exit => f.write_str("Exit"),
            Action::ExitThread => f.write_str("ExitThread"),
            Action::SpawnThread { entry } => {
                f.debug_struct("SpawnThread").field("entry", entry).finish()
            }
            Action::Yield => f.write_str("Yield"),
            Action::Sleep => f.write_str("Sleep"),
            Action::Hook(_) => f.write_str("Hook(..)"),
        }
    }
}

/// What happens after a block's work.
#[derive(Debug, Clone)]
pub enum Flow {
    /// Fall through to the next block (return after the last one).
    Next,
    /// Run blocks `to..=` this one `times` times in all, then fall through.
    Loop {
        /// The first block of the loop body (at most this block's index).
        to: usize,
        /// How many times the body runs (0 behaves as 1).
        times: u64,
    },
    /// Call a function of the same mode; execution resumes at the next block when it returns.
    Call(FunctionId),
    /// A system call: enter a kernel function from a user function; execution resumes in user
    /// mode at the next block when it returns.
    Syscall(FunctionId),
    /// Return from the function.
    Return,
    /// Perform a system action, then fall through (unless the action ends the thread).
    System(Action),
}

/// A basic block.
#[derive(Debug, Clone)]
pub struct Block {
    /// Its first address.
    pub start: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The mode it runs in.
    pub ring: Ring,
    /// The events of one execution.
    pub work: Work,
    /// Executions per visit (0: the work is skipped).
    pub repeat: u64,
    /// What follows.
    pub flow: Flow,
}

impl Block {
    /// Whether `address` lies in the block.
    pub fn contains(&self, address: u64) -> bool {
        address >= self.start && address - self.start < self.len
    }

    /// The first address after the block (the return address of a call block).
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// A function: consecutive blocks.
#[derive(Debug, Clone)]
pub struct Function {
    name: String,
    start: u64,
    kernel: bool,
    blocks: Vec<Block>,
}

impl Function {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it is a kernel function (kernel text, kernel mode, frames on the kernel stack).
    pub fn is_kernel(&self) -> bool {
        self.kernel
    }

    /// Its first address.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The first address after its last block.
    pub fn end(&self) -> u64 {
        self.blocks.last().map_or(self.start, Block::end)
    }

    /// Its blocks.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Block `index`.
    ///
    /// # Panics
    /// If there is no such block.
    pub fn block(&self, index: usize) -> &Block {
        &self.blocks[index]
    }
}

/// A program: functions and an entry point, shared by the processes that run it.
#[derive(Debug, Clone)]
pub struct Program {
    path: String,
    functions: Vec<Function>,
    entry: FunctionId,
}

impl Program {
    /// The executable's path (what the driver's exec hook is told).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The entry function.
    pub fn entry(&self) -> FunctionId {
        self.entry
    }

    /// Every function, in definition order.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// The user functions (the executable's text), in definition order.
    pub fn user_functions(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| !f.kernel)
    }

    /// Function `id`.
    ///
    /// # Panics
    /// If there is no such function.
    pub fn function(&self, id: FunctionId) -> &Function {
        &self.functions[id.0]
    }

    /// The function named `name`.
    pub fn function_id(&self, name: &str) -> Option<FunctionId> {
        self.functions.iter().position(|f| f.name == name).map(FunctionId)
    }

    /// The function and block index that contain `address` (symbolization).
    pub fn block_at(&self, address: u64) -> Option<(FunctionId, usize)> {
        self.functions.iter().enumerate().find_map(|(f, function)| {
            let index = function.blocks.iter().position(|b| b.contains(address))?;
            Some((FunctionId(f), index))
        })
    }
}

/// Where [`ProgramBuilder::new`] puts the first function.
pub const DEFAULT_TEXT_BASE: u64 = 0x40_0000;
/// Where [`ProgramBuilder::kernel_function`] puts the first kernel function (the kernel's text
/// on amd64).
pub const KERNEL_TEXT_BASE: u64 = 0xffff_ffff_8000_0000;
/// The length of a block unless [`FunctionBuilder::len`] says otherwise.
pub const DEFAULT_BLOCK_LEN: u64 = 16;
/// Functions laid out by the builder start on this alignment.
pub const FUNCTION_ALIGN: u64 = 64;

/// Builds a [`Program`]: functions by name (referenced by name before they are defined), laid
/// out from a text base address in definition order.
#[derive(Debug)]
pub struct ProgramBuilder {
    path: String,
    text_base: u64,
    functions: Vec<(Option<u64>, FunctionBuilder)>,
    entry: Option<String>,
}

impl ProgramBuilder {
    /// A program at `path` with its text at [`DEFAULT_TEXT_BASE`].
    pub fn new(path: &str) -> Self {
        ProgramBuilder {
            path: path.to_owned(),
            text_base: DEFAULT_TEXT_BASE,
            functions: Vec::new(),
            entry: None,
        }
    }

    /// Lays the functions out from `base` instead.
    pub fn text_base(mut self, base: u64) -> Self {
        self.text_base = base;
        self
    }

    /// Adds function `name`, laid out after the previous one, with the blocks `build` adds.
    pub fn function(
        mut self,
        name: &str,
        build: impl FnOnce(FunctionBuilder) -> FunctionBuilder,
    ) -> Self {
        self.functions.push((None, build(FunctionBuilder::new(name))));
        self
    }

    /// Adds kernel function `name`, laid out in kernel text after the previous kernel function
    /// (the first at [`KERNEL_TEXT_BASE`]), with the blocks `build` adds: they run in kernel mode
    /// (its control blocks too) and its frames live on the thread's kernel stack. User functions
    /// enter it with [`FunctionBuilder::syscall`], kernel functions with
    /// [`FunctionBuilder::call`].
    pub fn kernel_function(
        mut self,
        name: &str,
        build: impl FnOnce(FunctionBuilder) -> FunctionBuilder,
    ) -> Self {
        self.functions.push((None, build(FunctionBuilder::kernel(name))));
        self
    }

    /// Adds function `name` at address `start`; the following functions are laid out after it.
    pub fn function_at(
        mut self,
        name: &str,
        start: u64,
        build: impl FnOnce(FunctionBuilder) -> FunctionBuilder,
    ) -> Self {
        self.functions.push((Some(start), build(FunctionBuilder::new(name))));
        self
    }

    /// Makes `name` the entry function (default: the first one).
    pub fn entry(mut self, name: &str) -> Self {
        self.entry = Some(name.to_owned());
        self
    }

    /// Lays the program out and resolves the function names.
    ///
    /// # Panics
    /// If a function name is defined twice or used but not defined, a function has no block, a
    /// loop jumps forward, the program has no function, a call crosses between user and kernel
    /// functions, a system call does not go from a user function to a kernel function, a kernel
    /// function has a user-mode block, or the entry, a forked child or a new thread would start
    /// in a kernel function.
    pub fn build(self) -> Rc<Program> {
        assert!(!self.functions.is_empty(), "program {} has no function", self.path);
        let mut ids = BTreeMap::new();
        for (i, (_, f)) in self.functions.iter().enumerate() {
            let previous = ids.insert(f.name.clone(), (FunctionId(i), f.kernel));
            assert!(previous.is_none(), "function {} defined twice", f.name);
        }
        let resolve_any = |name: &str| -> (FunctionId, bool) {
            *ids.get(name).unwrap_or_else(|| panic!("no function named {name}"))
        };
        let resolve_user = |name: &str, what: &str| -> FunctionId {
            let (id, kernel) = resolve_any(name);
            assert!(!kernel, "{what} {name} is a kernel function");
            id
        };
        let mut next = self.text_base;
        let mut kernel_next = KERNEL_TEXT_BASE;
        let mut functions = Vec::with_capacity(self.functions.len());
        for (at, builder) in self.functions {
            let name = &builder.name;
            assert!(!builder.blocks.is_empty(), "function {name} has no block");
            let cursor = if builder.kernel { kernel_next } else { next };
            let start = at.unwrap_or_else(|| cursor.next_multiple_of(FUNCTION_ALIGN));
            let mut address = start;
            let mut blocks = Vec::with_capacity(builder.blocks.len());
            for (index, pending) in builder.blocks.into_iter().enumerate() {
                let flow = match pending.flow {
                    PendingFlow::Next => Flow::Next,
                    PendingFlow::Loop { to, times } => {
                        assert!(
                            to <= index,
                            "loop in {} at block {index} jumps forward to {to}",
                            builder.name
                        );
                        Flow::Loop { to, times }
                    }
                    PendingFlow::Call(callee) => {
                        let (id, kernel) = resolve_any(&callee);
                        assert!(
                            kernel == builder.kernel,
                            "{name} calls {callee} across the user/kernel boundary (a user \
                             function enters the kernel with syscall)"
                        );
                        Flow::Call(id)
                    }
                    PendingFlow::Syscall(callee) => {
                        let (id, kernel) = resolve_any(&callee);
                        assert!(
                            kernel && !builder.kernel,
                            "a system call goes from a user function to a kernel function, \
                             not from {name} to {callee}"
                        );
                        Flow::Syscall(id)
                    }
                    PendingFlow::Return => Flow::Return,
                    PendingFlow::Fork(child) => {
                        Flow::System(Action::Fork { child: resolve_user(&child, "forked child") })
                    }
                    PendingFlow::SpawnThread(entry) => Flow::System(Action::SpawnThread {
                        entry: resolve_user(&entry, "thread entry"),
                    }),
                    PendingFlow::System(action) => Flow::System(action),
                };
                assert!(
                    !builder.kernel || pending.ring == Ring::Kernel,
                    "kernel function {name} has a user-mode block ({index})"
                );
                let block = Block {
                    start: address,
                    len: pending.len,
                    ring: pending.ring,
                    work: pending.work,
                    repeat: pending.repeat,
                    flow,
                };
                address = block.end();
                blocks.push(block);
            }
            if builder.kernel {
                kernel_next = address;
            } else {
                next = address;
            }
            functions.push(Function { name: builder.name, start, kernel: builder.kernel, blocks });
        }
        let entry = match &self.entry {
            Some(name) => resolve_user(name, "the entry"),
            None => {
                assert!(
                    !functions[0].kernel,
                    "the entry {} is a kernel function",
                    functions[0].name
                );
                FunctionId(0)
            }
        };
        Rc::new(Program { path: self.path, functions, entry })
    }
}

#[derive(Debug)]
enum PendingFlow {
    Next,
    Loop { to: usize, times: u64 },
    Call(String),
    Syscall(String),
    Return,
    Fork(String),
    SpawnThread(String),
    System(Action),
}

#[derive(Debug)]
struct PendingBlock {
    len: u64,
    ring: Ring,
    work: Work,
    repeat: u64,
    flow: PendingFlow,
}

/// Builds the blocks of one function, in order. Methods that set a property of "the last block"
/// panic if there is none.
///
/// Control blocks (`call`, `ret`, `fork`, …) are blocks with no work of their own (one
/// execution of an empty [`Work`]), in user mode (kernel mode in a kernel function);
/// [`FunctionBuilder::work`] and [`FunctionBuilder::ring`] change that.
#[derive(Debug)]
pub struct FunctionBuilder {
    name: String,
    kernel: bool,
    blocks: Vec<PendingBlock>,
}

impl FunctionBuilder {
    fn new(name: &str) -> Self {
        FunctionBuilder { name: name.to_owned(), kernel: false, blocks: Vec::new() }
    }

    fn kernel(name: &str) -> Self {
        FunctionBuilder { name: name.to_owned(), kernel: true, blocks: Vec::new() }
    }

    fn push(mut self, ring: Ring, work: Work, repeat: u64, flow: PendingFlow) -> Self {
        self.blocks.push(PendingBlock { len: DEFAULT_BLOCK_LEN, ring, work, repeat, flow });
        self
    }

    fn control(self, flow: PendingFlow) -> Self {
        let ring = if self.kernel { Ring::Kernel } else { Ring::User };
        self.push(ring, Work::default(), 1, flow)
    }

    fn last(&mut self) -> &mut PendingBlock {
        let name = &self.name;
        self.blocks.last_mut().unwrap_or_else(|| panic!("function {name} has no block yet"))
    }

    /// A block executed once per visit.
    pub fn block(self, ring: Ring, work: Work) -> Self {
        self.push(ring, work, 1, PendingFlow::Next)
    }

    /// A block executed `times` times in a row per visit (a tight loop, retired in O(1)).
    pub fn repeat(self, ring: Ring, work: Work, times: u64) -> Self {
        self.push(ring, work, times, PendingFlow::Next)
    }

    /// Makes the last block jump back to block `to` so that blocks `to..=last` run `times` times.
    /// If the last block already has a control flow (a call, a system action, …), a control block
    /// carrying the loop is appended instead.
    pub fn loop_to(mut self, to: usize, times: u64) -> Self {
        let last = self.last();
        if matches!(last.flow, PendingFlow::Next) {
            last.flow = PendingFlow::Loop { to, times };
            self
        } else {
            self.control(PendingFlow::Loop { to, times })
        }
    }

    /// Sets the length in bytes of the last block.
    pub fn len(mut self, bytes: u64) -> Self {
        self.last().len = bytes;
        self
    }

    /// Sets the work of the last block.
    pub fn work(mut self, work: Work) -> Self {
        self.last().work = work;
        self
    }

    /// Sets the ring of the last block.
    pub fn ring(mut self, ring: Ring) -> Self {
        self.last().ring = ring;
        self
    }

    /// A block that calls function `name` (a user function from a user function, a kernel
    /// function from a kernel function).
    pub fn call(self, name: &str) -> Self {
        self.control(PendingFlow::Call(name.to_owned()))
    }

    /// A block that makes a system call: it enters kernel function `name`, and the thread
    /// returns to user mode, at the next block, when that function returns.
    pub fn syscall(self, name: &str) -> Self {
        self.control(PendingFlow::Syscall(name.to_owned()))
    }

    /// A block that returns.
    pub fn ret(self) -> Self {
        self.control(PendingFlow::Return)
    }

    /// A block that forks a child running function `child`.
    pub fn fork(self, child: &str) -> Self {
        self.control(PendingFlow::Fork(child.to_owned()))
    }

    /// A block that creates a thread running function `entry`.
    pub fn spawn_thread(self, entry: &str) -> Self {
        self.control(PendingFlow::SpawnThread(entry.to_owned()))
    }

    /// A block that executes `program` (set-id with `set_id` credentials).
    pub fn exec(self, program: Rc<Program>, set_id: Option<Credentials>) -> Self {
        self.control(PendingFlow::System(Action::Exec { program, set_id }))
    }

    /// A block that exits the process.
    pub fn exit(self) -> Self {
        self.control(PendingFlow::System(Action::Exit))
    }

    /// A block that exits the thread.
    pub fn exit_thread(self) -> Self {
        self.control(PendingFlow::System(Action::ExitThread))
    }

    /// A block that yields the CPU.
    pub fn yield_now(self) -> Self {
        self.control(PendingFlow::System(Action::Yield))
    }

    /// A block that sleeps until woken.
    pub fn sleep(self) -> Self {
        self.control(PendingFlow::System(Action::Sleep))
    }

    /// A block that calls `hook` as the thread.
    pub fn hook(self, hook: impl Fn(&HookContext<'_>) + 'static) -> Self {
        self.control(PendingFlow::System(Action::Hook(Rc::new(hook))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_laid_out_consecutively_and_names_resolve() {
        let program = ProgramBuilder::new("/bin/t")
            .function("main", |f| f.call("g").len(5).block(Ring::User, Work::default()).exit())
            .function("g", |f| f.block(Ring::Kernel, Work::default()).len(100))
            .function_at("k", 0xffff_ffff_8000_0000, |f| f.ret())
            .build();
        let main = program.function(FunctionId(0));
        assert_eq!(main.start(), DEFAULT_TEXT_BASE);
        assert_eq!(main.block(0).start, DEFAULT_TEXT_BASE);
        assert_eq!(main.block(1).start, DEFAULT_TEXT_BASE + 5);
        assert_eq!(main.block(2).start, DEFAULT_TEXT_BASE + 5 + DEFAULT_BLOCK_LEN);
        assert!(matches!(main.block(0).flow, Flow::Call(FunctionId(1))));
        let g = program.function(FunctionId(1));
        assert_eq!(g.start(), main.end().next_multiple_of(FUNCTION_ALIGN));
        assert_eq!(g.end(), g.start() + 100);
        assert_eq!(program.function(FunctionId(2)).start(), 0xffff_ffff_8000_0000);
        assert_eq!(program.block_at(g.start() + 99), Some((FunctionId(1), 0)));
        assert_eq!(program.block_at(g.start() + 100), None);
        assert_eq!(program.function_id("k"), Some(FunctionId(2)));
    }

    #[test]
    fn kernel_functions_are_laid_out_in_kernel_text_and_run_in_kernel_mode() {
        let program = ProgramBuilder::new("/bin/t")
            .function("main", |f| f.syscall("sys").exit())
            .kernel_function("sys", |f| f.block(Ring::Kernel, Work::default()).call("k").ret())
            .function("g", |f| f.ret())
            .kernel_function("k", |f| f.hook(|_| {}))
            .build();
        let function = |name| program.function(program.function_id(name).unwrap());
        let (main, sys, g, k) = (function("main"), function("sys"), function("g"), function("k"));
        assert!(
            matches!(main.block(0).flow, Flow::Syscall(id) if id == program.function_id("sys").unwrap())
        );
        assert_eq!(sys.start(), KERNEL_TEXT_BASE);
        assert!(sys.is_kernel() && k.is_kernel() && !main.is_kernel() && !g.is_kernel());
        assert_eq!(g.start(), main.end().next_multiple_of(FUNCTION_ALIGN), "user text goes on");
        assert_eq!(k.start(), sys.end().next_multiple_of(FUNCTION_ALIGN), "so does kernel text");
        assert!(sys.blocks().iter().chain(k.blocks()).all(|b| b.ring == Ring::Kernel));
        let user: Vec<&str> = program.user_functions().map(Function::name).collect();
        assert_eq!(user, ["main", "g"]);
    }

    #[test]
    #[should_panic(expected = "across the user/kernel boundary")]
    fn a_user_function_cannot_call_a_kernel_function() {
        ProgramBuilder::new("/bin/t")
            .function("main", |f| f.call("sys"))
            .kernel_function("sys", |f| f.ret())
            .build();
    }

    #[test]
    #[should_panic(expected = "a system call goes from a user function to a kernel function")]
    fn a_system_call_must_enter_a_kernel_function() {
        ProgramBuilder::new("/bin/t")
            .function("main", |f| f.syscall("g"))
            .function("g", |f| f.ret())
            .build();
    }

    #[test]
    #[should_panic(expected = "kernel function sys has a user-mode block")]
    fn a_kernel_function_has_no_user_mode_block() {
        ProgramBuilder::new("/bin/t")
            .function("main", |f| f.syscall("sys"))
            .kernel_function("sys", |f| f.block(Ring::User, Work::default()))
            .build();
    }

    #[test]
    #[should_panic(expected = "thread entry sys is a kernel function")]
    fn a_thread_cannot_start_in_a_kernel_function() {
        ProgramBuilder::new("/bin/t")
            .function("main", |f| f.spawn_thread("sys"))
            .kernel_function("sys", |f| f.ret())
            .build();
    }

    #[test]
    #[should_panic(expected = "no function named nowhere")]
    fn an_unknown_function_is_refused() {
        ProgramBuilder::new("/bin/t").function("main", |f| f.call("nowhere")).build();
    }

    #[test]
    #[should_panic(expected = "jumps forward")]
    fn a_forward_loop_is_refused() {
        ProgramBuilder::new("/bin/t")
            .function("main", |f| f.block(Ring::User, Work::default()).loop_to(3, 2))
            .build();
    }
}
