//! From a program counter to a function: each process's address space (which image is mapped
//! where), the images' ELF symbol tables and their separate debug files, source lines from
//! DWARF, JIT map files, the kernel's symbols, and demangled names.

pub(crate) mod address_space;
pub(crate) mod debuginfo;
pub(crate) mod demangle;
pub(crate) mod image;
pub(crate) mod image_file;
pub(crate) mod jitmap;
pub(crate) mod kallsyms;
pub(crate) mod lines;
