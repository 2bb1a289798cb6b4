//! A network of its own for each node of a test cluster, so the network
//! between nodes can be cut: every node runs in a network namespace with
//! one address on a bridge that the test (and its clients) reach from the
//! host. Cutting a node off installs blackhole routes on both sides: its
//! packets to the other nodes and theirs to it vanish without an answer,
//! as on a partitioned network (connections neither close nor get refused),
//! while clients on the host still reach every node.
//!
//! The bridge lives in a namespace of its own too: bridged traffic in the
//! host's namespace would pass the host's firewall (Docker's FORWARD policy
//! drops it when `br_netfilter` is loaded).
//!
//! Needs root and iproute2 (`ip`), which `scripts/setup.sh` installs.

use std::process::Command;

/// Switch namespaces are named `ottla-sw<N>`, N in this range; taking a
/// free N (an atomic `ip netns add`) also takes the subnet 10.213.N.0/24.
const SUBNETS: std::ops::Range<u16> = 1..250;

pub struct NodeNetwork {
    subnet: u16,
    nodes: usize,
    cut: Vec<bool>,
}

impl NodeNetwork {
    /// The switch, and one namespace per node, each with its address on
    /// the switch; the host gets 10.213.N.1 on it.
    pub fn create(nodes: usize) -> Self {
        let subnet = SUBNETS
            .clone()
            .find(|n| try_ip(&["netns", "add", &switch(*n)]))
            .expect("a free switch namespace: ottla-sw1..249 are all taken (delete stale ones with `ip netns del`)");
        let network = Self {
            subnet,
            nodes,
            cut: vec![false; nodes],
        };
        let sw = switch(subnet);
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &sw, "link", "set", "br0", "up"]);
        let host_end = host_end(subnet);
        // Left by an earlier network of this subnet: a namespace's links
        // go away some time after the namespace.
        try_ip(&["link", "del", &host_end]);
        network.plug(&host_end, None);
        ip(&[
            "addr",
            "add",
            &format!("10.213.{subnet}.1/24"),
            "dev",
            &host_end,
        ]);
        ip(&["link", "set", &host_end, "up"]);
        for i in 0..nodes {
            let ns = network.namespace(i);
            // A namespace left by a killed run of the same subnet goes first.
            try_ip(&["netns", "del", &ns]);
            ip(&["netns", "add", &ns]);
            let node_end = format!("ob{subnet}n{i}");
            network.plug(&node_end, Some(&ns));
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            let address = format!("{}/24", network.host(i));
            ip(&["-n", &ns, "addr", "add", &address, "dev", &node_end]);
            ip(&["-n", &ns, "link", "set", &node_end, "up"]);
        }
        network
    }

    /// A veth pair from the switch's bridge to `end`, moved into namespace
    /// `ns` (or left in the host's).
    fn plug(&self, end: &str, ns: Option<&str>) {
        let sw = switch(self.subnet);
        let port = format!("{end}s");
        ip(&["link", "add", end, "type", "veth", "peer", "name", &port]);
        ip(&["link", "set", &port, "netns", &sw]);
        ip(&["-n", &sw, "link", "set", &port, "master", "br0"]);
        ip(&["-n", &sw, "link", "set", &port, "up"]);
        if let Some(ns) = ns {
            ip(&["link", "set", end, "netns", ns]);
        }
    }

    /// The address of node `i` (0-based).
    pub fn host(&self, i: usize) -> String {
        format!("10.213.{}.{}", self.subnet, i + 2)
    }

    /// The namespace node `i` runs in.
    pub fn namespace(&self, i: usize) -> String {
        format!("ottla-{}-{i}", self.subnet)
    }

    /// Cuts node `i` off from every other node (not from the host).
    pub fn cut_off(&mut self, i: usize) {
        self.set_cut(i, true);
    }

    /// Undoes [`cut_off`](Self::cut_off).
    pub fn heal(&mut self, i: usize) {
        self.set_cut(i, false);
    }

    fn set_cut(&mut self, i: usize, cut: bool) {
        if self.cut[i] == cut {
            return;
        }
        let others: Vec<usize> = (0..self.nodes).filter(|o| *o != i).collect();
        self.blackhole(&[i], &others, cut);
        self.cut[i] = cut;
    }

    /// Cuts every node of `a` off from every node of `b`, as a network
    /// partition between two sites (nodes on the same side still reach
    /// each other). Not to be combined with [`cut_off`](Self::cut_off) of
    /// the same nodes: the routes would collide.
    pub fn cut_between(&mut self, a: &[usize], b: &[usize]) {
        self.blackhole(a, b, true);
    }

    /// Undoes [`cut_between`](Self::cut_between).
    pub fn heal_between(&mut self, a: &[usize], b: &[usize]) {
        self.blackhole(a, b, false);
    }

    /// Adds (or deletes) blackhole routes from each node of `a` to each of
    /// `b`, and back.
    fn blackhole(&self, a: &[usize], b: &[usize], cut: bool) {
        let action = if cut { "add" } else { "del" };
        for &i in a {
            for &other in b {
                for (at, to) in [(i, other), (other, i)] {
                    ip(&[
                        "-n",
                        &self.namespace(at),
                        "route",
                        action,
                        "blackhole",
                        &format!("{}/32", self.host(to)),
                    ]);
                }
            }
        }
    }
}

impl Drop for NodeNetwork {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends in it, and with them
        // their peers, but later: the host's end goes now, so the next
        // network of this subnet can have it.
        try_ip(&["link", "del", &host_end(self.subnet)]);
        for i in 0..self.nodes {
            try_ip(&["netns", "del", &self.namespace(i)]);
        }
        try_ip(&["netns", "del", &switch(self.subnet)]);
    }
}

/// The host's end of its veth pair to the switch.
fn host_end(subnet: u16) -> String {
    format!("ob{subnet}h")
}

fn switch(subnet: u16) -> String {
    format!("ottla-sw{subnet}")
}

/// Runs `ip args`; panics with its error output when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("run `ip` (iproute2; scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "ip {} failed (network namespaces need root): {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `ip args`; whether it succeeded.
fn try_ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;
    use std::time::Duration;

    #[test]
    fn nodes_reach_each_other_until_one_is_cut_off() {
        let mut net = NodeNetwork::create(2);
        // A listener inside node 0's namespace, reached from node 1's.
        // Python inside node `i`'s namespace.
        let python_in = |net: &NodeNetwork, i: usize, code: String| {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &net.namespace(i), "python3", "-c"])
                .arg(code);
            c
        };
        let mut server = python_in(
            &net,
            0,
            format!(
                "import socket,time\ns=socket.socket()\ns.bind(('{}',7000))\ns.listen()\ntime.sleep(60)",
                net.host(0)
            ),
        )
        .spawn()
        .unwrap();
        let connects_from_1 = |net: &NodeNetwork| {
            let code = format!(
                "import socket\nsocket.create_connection(('{}',7000),timeout=1)",
                net.host(0)
            );
            python_in(net, 1, code).status().unwrap().success()
        };
        let from_host = |net: &NodeNetwork| {
            let addr = format!("{}:7000", net.host(0)).parse().unwrap();
            TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !from_host(&net) {
            assert!(
                std::time::Instant::now() < deadline,
                "node 0 never listened"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(connects_from_1(&net));
        net.cut_off(0);
        assert!(!connects_from_1(&net), "a cut-off node is unreachable");
        assert!(from_host(&net), "the host still reaches it");
        net.heal(0);
        assert!(connects_from_1(&net));
        let _ = server.kill();
        let _ = server.wait();
    }
}
