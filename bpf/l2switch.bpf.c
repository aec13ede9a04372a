// SPDX-License-Identifier: GPL-2.0
/*
 * fidelnet's learning switch in tc BPF (`switch: bpf`, see docs/switches.md).
 *
 * One program serves every switch of a run. It runs as a cls_bpf
 * direct-action classifier on the clsact ingress of each switch port (the
 * switch's end of each link, in the run's fabric namespace) and does what a
 * Linux bridge without STP does for a frame arriving there:
 *
 *  - learns the source MAC on the arrival port (per switch, in `sw_fdb`),
 *  - sends a frame for a learnt unicast MAC out of that one port (none when
 *    it is the arrival port), and floods broadcast, multicast and unknown
 *    unicast to every other port of the switch that is up,
 *  - does not forward IEEE 802.1D link-local frames (01:80:c2:00:00:01-0f),
 *    forwards 01:80:c2:00:00:00 (STP) as a bridge without STP does,
 *  - forgets an address not seen for 300 s (the bridge's ageing time),
 *  - neither takes nor sends frames on a port that is down or blocked: a
 *    switch with `stp` gets a spanning tree computed by fidelnet from the
 *    topology (fidelnet.switches.tree), which blocks the other ports.
 *
 * Why not a Linux bridge per switch: deleting a bridge costs the kernel one
 * rcu_barrier() (br_multicast_dev_del), 16-22 ms on a 2-vCPU VM with the RTNL
 * lock held, so tearing down 5,000 switches kept the machine's networking
 * blocked for over a minute. This program and its maps go with the last port.
 *
 * Maps (filled from user space, fidelnet.kernel.l2switch):
 *   sw_ports:  port ifindex -> its switch, its slot in the flood list, forwarding
 *   sw_state:  switch id -> number of flood slots, up/down, generation (a new
 *              one forgets every address the switch learnt: the spanning tree
 *              changed, as STP's topology change flushes a bridge's table)
 *   sw_flood:  (switch, slot) -> port ifindex (0: a port that is down or gone)
 *   sw_fdb:    (switch, MAC) -> port ifindex, last seen (LRU)
 *   sw_stats:  per-CPU counters, enum counter below
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define MAX_SWITCHES 65536
#define MAX_SLOTS 65536
#define AGEING_NS (300ULL * 1000000000ULL)
#define REFRESH_NS (1000000000ULL)

enum counter {
	FORWARDED = 0,	/* sent out of the one port its address was learnt on */
	FLOODED,	/* sent out of every other port that is up */
	FLOOD_COPIES,	/* copies those floods made */
	LEARNT,		/* source addresses learnt or moved */
	SAME_PORT,	/* for an address on the port it came in on: not sent */
	LINK_LOCAL,	/* 802.1D link-local group address: not forwarded */
	SWITCH_DOWN,	/* arrived while its switch was stopped */
	NOT_A_PORT,	/* on an interface no switch knows: passed to the stack */
	RUNT,		/* shorter than an Ethernet header */
	NO_PORT,	/* flooded on a switch with no other port up */
	PORT_BLOCKED,	/* arrived on a port that is down or blocked (spanning tree) */
	COUNTERS,
};

struct port {
	__u32 sw;
	__u32 slot;
	__u32 up;
	__u32 pad;
};

struct sw {
	__u32 slots;
	__u32 up;
	__u32 gen;	/* addresses learnt under another generation are forgotten */
	__u32 pad;
};

struct fdb_key {
	__u32 sw;
	__u8 mac[6];
	__u16 pad;
};

struct fdb_val {
	__u32 ifindex;
	__u32 gen;
	__u64 seen;
};

struct slot_key {
	__u32 sw;
	__u32 slot;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SLOTS * 4);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct port);
} sw_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SWITCHES);
	__type(key, __u32);
	__type(value, struct sw);
} sw_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SLOTS * 4);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct slot_key);
	__type(value, __u32);
} sw_flood SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 131072);
	__type(key, struct fdb_key);
	__type(value, struct fdb_val);
} sw_fdb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} sw_stats SEC(".maps");

static __always_inline void count(__u32 c, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&sw_stats, &c);

	if (v)
		*v += n;
}

struct flood_ctx {
	struct __sk_buff *skb;
	__u32 sw;
	__u32 in;
	__u32 pending; /* a port found, not yet sent to */
	__u32 copies;
};

static long flood_slot(__u32 i, void *data)
{
	struct flood_ctx *c = data;
	struct slot_key k = { .sw = c->sw, .slot = i };
	__u32 *out = bpf_map_lookup_elem(&sw_flood, &k);

	if (!out || *out == 0 || *out == c->in)
		return 0;
	if (c->pending) {
		/* A copy for the port found before; the original goes to the last. */
		if (bpf_clone_redirect(c->skb, c->pending, 0) == 0)
			c->copies++;
	}
	c->pending = *out;
	return 0;
}

SEC("tc")
int l2switch(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	__u32 in = skb->ifindex;
	struct fdb_key src = {}, dst = {};
	struct fdb_val *v;
	struct port *p;
	struct sw *s;
	__u64 now;

	p = bpf_map_lookup_elem(&sw_ports, &in);
	if (!p) {
		count(NOT_A_PORT, 1);
		return TC_ACT_OK;
	}
	if ((void *)(eth + 1) > end) {
		count(RUNT, 1);
		return TC_ACT_SHOT;
	}
	if (!p->up) {
		count(PORT_BLOCKED, 1);
		return TC_ACT_SHOT;
	}
	__builtin_memcpy(src.mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(dst.mac, eth->h_dest, ETH_ALEN);
	src.sw = dst.sw = p->sw;
	s = bpf_map_lookup_elem(&sw_state, &src.sw);
	if (!s || !s->up) {
		count(SWITCH_DOWN, 1);
		return TC_ACT_SHOT;
	}
	if (dst.mac[0] == 0x01 && dst.mac[1] == 0x80 && dst.mac[2] == 0xc2 &&
	    dst.mac[3] == 0 && dst.mac[4] == 0 && (dst.mac[5] & 0xf0) == 0 &&
	    dst.mac[5] != 0) {
		count(LINK_LOCAL, 1);
		return TC_ACT_SHOT;
	}
	now = bpf_ktime_get_ns();
	if (!(src.mac[0] & 1)) {
		v = bpf_map_lookup_elem(&sw_fdb, &src);
		if (!v || v->ifindex != in || v->gen != s->gen ||
		    now - v->seen > REFRESH_NS) {
			struct fdb_val nv = { .ifindex = in, .gen = s->gen, .seen = now };

			if (!v || v->ifindex != in || v->gen != s->gen)
				count(LEARNT, 1);
			bpf_map_update_elem(&sw_fdb, &src, &nv, BPF_ANY);
		}
	}
	if (!(dst.mac[0] & 1)) {
		v = bpf_map_lookup_elem(&sw_fdb, &dst);
		if (v && v->gen == s->gen && now - v->seen < AGEING_NS) {
			if (v->ifindex == in) {
				count(SAME_PORT, 1);
				return TC_ACT_SHOT;
			}
			p = bpf_map_lookup_elem(&sw_ports, &v->ifindex);
			if (p && p->up) {
				count(FORWARDED, 1);
				return bpf_redirect(v->ifindex, 0);
			}
			/* Learnt on a port that is down now: flood, as a miss. */
		}
	}
	struct flood_ctx c = { .skb = skb, .sw = src.sw, .in = in };
	__u32 slots = s->slots;

	if (slots > MAX_SLOTS)
		slots = MAX_SLOTS;
	bpf_loop(slots, flood_slot, &c, 0);
	if (!c.pending) {
		count(NO_PORT, 1);
		return TC_ACT_SHOT;
	}
	count(FLOODED, 1);
	count(FLOOD_COPIES, c.copies + 1);
	return bpf_redirect(c.pending, 0);
}

char LICENSE[] SEC("license") = "GPL";
