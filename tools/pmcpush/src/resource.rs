//! The resource attributes a host can tell about itself and about a process: `host.name`,
//! `host.id`, `process.pid`, `process.executable.name`, `thread.id`/`thread.name` and
//! `container.id` (from the process's cgroups). Read from `/proc` and the machine ID files
//! where the host has them; an attribute the host cannot tell is left out.

use std::fs;

use crate::window::Resource;

impl Resource {
    /// `service.name` and what the host tells of itself: `host.name`, `host.id`.
    pub fn detect(service_name: &str) -> Resource {
        let mut resource = Resource::new(service_name);
        if let Some(name) = host_name() {
            resource.set("host.name", name);
        }
        if let Some(id) = host_id() {
            resource.set("host.id", id);
        }
        resource
    }

    /// `self` with the profiled process's attributes: `process.pid`, and where `/proc` tells
    /// them, `process.executable.name` and `container.id`.
    #[must_use]
    pub fn with_process(mut self, pid: u32) -> Resource {
        self.set("process.pid", i64::from(pid));
        let proc_dir = format!("/proc/{pid}");
        if let Some(name) = read_trimmed(&format!("{proc_dir}/comm")) {
            self.set("process.executable.name", name);
        }
        if let Some(id) = fs::read_to_string(format!("{proc_dir}/cgroup"))
            .ok()
            .and_then(|cgroups| container_id(&cgroups))
        {
            self.set("container.id", id);
        }
        self
    }

    /// `self` with `thread.id` and, when known, `thread.name`.
    #[must_use]
    pub fn with_thread(mut self, tid: u32, name: Option<&str>) -> Resource {
        self.set("thread.id", i64::from(tid));
        if let Some(name) = name {
            self.set("thread.name", name);
        }
        self
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn host_name() -> Option<String> {
    read_trimmed("/proc/sys/kernel/hostname").or_else(|| std::env::var("HOSTNAME").ok())
}

/// The machine ID (systemd's, else D-Bus's, else FreeBSD's host UUID).
fn host_id() -> Option<String> {
    ["/etc/machine-id", "/var/lib/dbus/machine-id", "/etc/hostid"]
        .iter()
        .find_map(|p| read_trimmed(p))
}

/// The container ID in a `/proc/PID/cgroup` text: the 64 hex digits container runtimes put in
/// the cgroup path (`/docker/ID`, `/system.slice/docker-ID.scope`,
/// `/kubepods/…/cri-containerd-ID.scope`, `/libpod-ID`), innermost cgroup first.
pub fn container_id(cgroups: &str) -> Option<String> {
    cgroups.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        path.rsplit('/').find_map(hex64)
    })
}

/// The first run of exactly 64 hex digits in `segment`.
fn hex64(segment: &str) -> Option<String> {
    segment.split(|c: char| !c.is_ascii_hexdigit()).find(|run| run.len() == 64).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_from_the_runtimes_cgroup_paths() {
        let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        for text in [
            format!("0::/system.slice/docker-{id}.scope\n"),
            format!("12:pids:/docker/{id}\n11:cpu:/docker/{id}\n"),
            format!("0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-{id}.scope\n"),
            format!("0::/machine.slice/libpod-{id}.scope/container\n"),
        ] {
            assert_eq!(container_id(&text).as_deref(), Some(id), "{text}");
        }
        assert_eq!(container_id("0::/user.slice/user-1000.slice/session-2.scope\n"), None);
    }

    #[test]
    fn this_process_has_a_pid_and_a_name() {
        let r =
            Resource::detect("svc").with_process(std::process::id()).with_thread(1, Some("main"));
        assert_eq!(
            r.get("process.pid").map(ToString::to_string),
            Some(std::process::id().to_string())
        );
        assert_eq!(r.get("thread.name").map(ToString::to_string).as_deref(), Some("main"));
    }
}
