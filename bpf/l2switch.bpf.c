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
 *    topology (fidelnet.switches.tree), which blocks the other ports,
 *  - snoops MLD (switches with snooping on, the default): IPv6 multicast
 *    other than to ff02::1 goes out of an edge port (one whose link does not
 *    lead to another switch) only when a node behind it reported listening to
 *    the group, or a multicast router is there (it sent an MLD query or a
 *    PIM message); MLD reports go to router ports only. A port to another
 *    switch ("trunk") gets a group's frames only when a member or a multicast
 *    router lies behind it (below, "Trunks"). See "MLD snooping" below for
 *    why no querier is needed here.
 *
 * Why not a Linux bridge per switch: deleting a bridge costs the kernel one
 * rcu_barrier() (br_multicast_dev_del), 16-22 ms on a 2-vCPU VM with the RTNL
 * lock held, so tearing down 5,000 switches kept the machine's networking
 * blocked for over a minute. This program and its maps go with the last port.
 *
 * MLD snooping. A snooping switch normally relies on a querier to learn
 * who listens, and floods unregistered groups because what it learnt may be
 * incomplete. Here every edge port is in the maps before its link can carry
 * a frame (fidelnet adds the port, then brings the switch's end up), and a
 * node sends unsolicited reports whenever it joins a group and again when
 * its link's carrier returns; so what is learnt on an edge port is complete
 * and a group nobody reported there is not sent there. Memberships are kept
 * per (switch, port, group) with the port's generation, which changes each
 * time the port comes up: what was learnt before is then forgotten. Reports
 * are learnt even while the switch is stopped (frames are still dropped).
 * IPv4 multicast (IGMP) is not snooped: it is flooded.
 *
 * Trunks. Every switch of the run shares these maps, so what one switch
 * learns at its edge is known to all: no report needs to cross a trunk for
 * the others to learn it. Per group, `sw_groups` lists the edge ports with a
 * member (the group :: lists the ports with a multicast router). fidelnet
 * numbers the switches of each loop-free part of the forwarding topology in
 * depth-first order (fidelnet.switches.regions), so the switches behind a
 * trunk port are one interval of those numbers, or the rest of the part
 * without one interval; it writes that region into the port (PORT_PRUNE),
 * and a group's frame leaves by the trunk only if a member's or a multicast
 * router's switch lies in it. A trunk without PORT_PRUNE gets all IPv6
 * multicast: one in a part with a loop (no tree to number), or one with a
 * switch behind it that does not learn here (a switch with snooping off, a
 * bridge or Open vSwitch switch). A group with more members than the list
 * holds, or one that could not be recorded (the map was full), goes to every
 * trunk. Without this, every host's start-up multicast (DAD, router
 * solicitations, MLD reports) crossed every switch of a chain: n hosts times
 * n switches (docs/scale.md).
 *
 * Maps (filled from user space, fidelnet.kernel.l2switch):
 *   sw_ports:  port ifindex -> its switch, its slot in the flood list, forwarding
 *   sw_state:  switch id -> number of flood slots, up/down, generation (a new
 *              one forgets every address the switch learnt: the spanning tree
 *              changed, as STP's topology change flushes a bridge's table)
 *   sw_flood:  (switch, slot) -> port ifindex (0: a port that is down or gone)
 *   sw_fdb:    (switch, MAC) -> port ifindex, last seen (LRU)
 *   sw_mdb:    (switch, port ifindex, IPv6 group) -> port generation (LRU)
 *   sw_mrouter: port ifindex -> port generation, last query or PIM seen
 *   sw_groups: IPv6 group -> edge ports with a member (:: -> with a router)
 *   sw_global: [0] = 1 once a group could not be recorded
 *   sw_scratch: per CPU, where the frame being switched has members or routers
 *   sw_stats:  per-CPU counters, enum counter below
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_SWITCHES 65536
#define MAX_SLOTS 65536
#define AGEING_NS (300ULL * 1000000000ULL)
#define REFRESH_NS (1000000000ULL)
#define MROUTER_NS (255ULL * 1000000000ULL) /* as a bridge's multicast_router_timeout */
#define MAX_RECORDS 64 /* MLDv2 records read from one report */
#define MEMBERS 8 /* edge ports listed per group; more: every trunk gets it */
#define MAX_GROUPS 65536

#define SW_SNOOP 1 /* struct sw flags: snoop MLD */
#define PORT_TRUNK 1 /* struct port flags: the link leads to another switch */
#define PORT_PRUNE 2 /* a trunk with a region: multicast only for what lies there */

/* What to do with a multicast frame (flood_ctx.mode). */
enum mode {
	FLOOD_ALL = 0,	/* every other port */
	TO_ROUTERS,	/* router ports and trunks toward one: an MLD report or done */
	TO_MEMBERS,	/* member and router ports, trunks toward either */
};

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
	SNOOPED,	/* IPv6 multicast sent to members, trunks and routers only */
	PRUNED,		/* IPv6 multicast no other port wanted: not sent */
	MLD_JOINED,	/* group memberships learnt from MLD reports */
	MLD_LEFT,	/* group memberships ended by MLD reports or dones */
	TRUNK_PRUNED,	/* copies not sent on a trunk: nothing wanted behind it */
	COUNTERS,
};

struct port {
	__u32 sw;
	__u32 slot;
	__u32 up;
	__u32 flags;	/* PORT_TRUNK, PORT_PRUNE */
	__u32 gen;	/* changes each time the port comes up (MLD memberships) */
	/* PORT_PRUNE: the switches behind it, by number: lo..hi but not xlo..xhi */
	__u32 lo;
	__u32 hi;
	__u32 xlo;
	__u32 xhi;
	__u32 pad;
};

struct sw {
	__u32 slots;
	__u32 up;
	__u32 gen;	/* addresses learnt under another generation are forgotten */
	__u32 flags;	/* SW_SNOOP */
	__u32 num;	/* depth-first number in its part of the topology; 0: none */
	__u32 pad;
};

struct members {
	__u32 port[MEMBERS];	/* edge port ifindexes; 0: free */
	__u32 overflow;		/* more than MEMBERS at once: every trunk gets the group */
	__u32 pad;
};

struct mdb_key {
	__u32 sw;
	__u32 ifindex;
	struct in6_addr group;
};

struct mark {
	__u32 gen;
	__u32 pad;
	__u64 seen;
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
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct mdb_key);
	__type(value, struct mark);
} sw_mdb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct mark);
} sw_mrouter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_GROUPS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct in6_addr);
	__type(value, struct members);
} sw_groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sw_global SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} sw_scratch SEC(".maps");

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
	__u32 mode;	/* enum mode */
	__u64 now;
	struct in6_addr group; /* TO_MEMBERS */
};

/* Where a frame's group has members or routers, gathered once per frame. In a per-CPU
 * map rather than on the stack: stack slots the verifier knows as 0 on some paths
 * and unknown on others made it verify the flood loop once per combination (150,000
 * instructions, half a second per load); map memory is always just "unknown". */
struct scratch {
	__u32 all;	/* every trunk gets it */
	__u32 nums[2 * MEMBERS]; /* switches with a member or router (0: none) */
};

/* A multicast router was seen behind this port lately. */
static __always_inline int is_mrouter(__u32 ifindex, __u32 gen, __u64 now)
{
	struct mark *m = bpf_map_lookup_elem(&sw_mrouter, &ifindex);

	return m && m->gen == gen && now - m->seen < MROUTER_NS;
}

/* A switch with a member or a router lies in trunk port p's region (what the
 * frame's scratch says), or the frame goes to every trunk. */
static __always_inline int behind(struct port *p)
{
	__u32 zero = 0;
	struct scratch *sc = bpf_map_lookup_elem(&sw_scratch, &zero);

	if (!sc || sc->all)
		return 1;
	for (int i = 0; i < 2 * MEMBERS; i++) {
		__u32 n = sc->nums[i];

		if (n && n >= p->lo && n <= p->hi && !(n >= p->xlo && n <= p->xhi))
			return 1;
	}
	count(TRUNK_PRUNED, 1);
	return 0;
}

/* Whether a frame of mode c->mode goes out of port `out`. */
static __always_inline int wanted(struct flood_ctx *c, __u32 out)
{
	struct port *p;
	struct mdb_key k = { .sw = c->sw, .ifindex = out };
	struct mark *m;

	if (c->mode == FLOOD_ALL)
		return 1;
	p = bpf_map_lookup_elem(&sw_ports, &out);
	if (!p)
		return 0;
	if (p->flags & PORT_TRUNK)
		return !(p->flags & PORT_PRUNE) || behind(p);
	if (is_mrouter(out, p->gen, c->now))
		return 1;
	if (c->mode != TO_MEMBERS)
		return 0;
	__builtin_memcpy(&k.group, &c->group, sizeof(k.group));
	m = bpf_map_lookup_elem(&sw_mdb, &k);
	return m && m->gen == p->gen;
}

static long flood_slot(__u32 i, void *data)
{
	struct flood_ctx *c = data;
	struct slot_key k = { .sw = c->sw, .slot = i };
	__u32 *out = bpf_map_lookup_elem(&sw_flood, &k);

	if (!out || *out == 0 || *out == c->in)
		return 0;
	if (!wanted(c, *out))
		return 0;
	if (c->pending) {
		/* A copy for the port found before; the original goes to the last. */
		if (bpf_clone_redirect(c->skb, c->pending, 0) == 0)
			c->copies++;
	}
	c->pending = *out;
	return 0;
}

static const struct in6_addr ROUTERS; /* the group :: lists the router ports */

static __always_inline void groups_full(void)
{
	__u32 zero = 0, *full = bpf_map_lookup_elem(&sw_global, &zero);

	if (full)
		*full = 1;
}

/* Edge port `ifindex` is listed under `group` (a free slot, or one whose port is
 * gone); no slot left: the group goes to every trunk from now on. Lock-free:
 * a slot changes by compare-and-swap only, so two CPUs never take the same. */
static __always_inline void list_port(const struct in6_addr *group, __u32 ifindex)
{
	struct members *m = bpf_map_lookup_elem(&sw_groups, group);
	struct members none = {};

	if (!m) {
		bpf_map_update_elem(&sw_groups, group, &none, BPF_NOEXIST);
		m = bpf_map_lookup_elem(&sw_groups, group);
		if (!m) {
			groups_full();
			return;
		}
	}
	for (int i = 0; i < MEMBERS; i++)
		if (m->port[i] == ifindex)
			return;
	for (int i = 0; i < MEMBERS; i++) {
		__u32 cur = m->port[i];

		if (cur && bpf_map_lookup_elem(&sw_ports, &cur))
			continue;
		if (__sync_val_compare_and_swap(&m->port[i], cur, ifindex) == cur)
			return;
	}
	m->overflow = 1;
}

static __always_inline void unlist_port(const struct in6_addr *group, __u32 ifindex)
{
	struct members *m = bpf_map_lookup_elem(&sw_groups, group);

	if (!m)
		return;
	for (int i = 0; i < MEMBERS; i++)
		if (m->port[i] == ifindex)
			__sync_val_compare_and_swap(&m->port[i], ifindex, 0);
}

/* The numbers of the switches with a port listed under `group` into sc->nums[at..];
 * routers: only ports where a router was seen lately. Returns 1 when every trunk
 * must get the frame. */
static __always_inline int collect(struct scratch *sc, const struct in6_addr *group, int at,
				   int routers, __u64 now)
{
	struct members *m = bpf_map_lookup_elem(&sw_groups, group);

	if (!m) {
		__u32 zero = 0, *full = bpf_map_lookup_elem(&sw_global, &zero);

		return !routers && full && *full; /* unknown: none, unless not recordable */
	}
	if (m->overflow)
		return 1;
	for (int i = 0; i < MEMBERS; i++) {
		__u32 ix = m->port[i];
		struct port *q;
		struct sw *s;

		if (!ix)
			continue;
		q = bpf_map_lookup_elem(&sw_ports, &ix);
		if (!q || (routers && !is_mrouter(ix, q->gen, now)))
			continue;
		s = bpf_map_lookup_elem(&sw_state, &q->sw);
		if (s)
			sc->nums[(at + i) & (2 * MEMBERS - 1)] = s->num;
	}
	return 0;
}

/* One listener more or less for `group` behind port `in` (its generation `gen`). */
static __always_inline void membership(__u32 sw, __u32 in, __u32 gen, struct in6_addr *group,
				       int join, __u64 now)
{
	struct mdb_key k = { .sw = sw, .ifindex = in };
	struct mark m = { .gen = gen, .seen = now };

	__builtin_memcpy(&k.group, group, sizeof(k.group));
	if (join) {
		bpf_map_update_elem(&sw_mdb, &k, &m, BPF_ANY);
		list_port(group, in);
		count(MLD_JOINED, 1);
	} else if (bpf_map_delete_elem(&sw_mdb, &k) == 0) {
		unlist_port(group, in);
		count(MLD_LEFT, 1);
	}
}

struct mld2_ctx {
	struct __sk_buff *skb;
	__u32 off;	/* the next record */
	__u32 sw;
	__u32 in;
	__u32 gen;
	__u64 now;
};

struct mld2_record {
	__u8 type;
	__u8 auxlen;	/* 32-bit words */
	__be16 nsrc;
	struct in6_addr group;
};

static long mld2_record(__u32 i, void *data)
{
	struct mld2_ctx *c = data;
	struct mld2_record r;
	__u32 nsrc;

	if (bpf_skb_load_bytes(c->skb, c->off, &r, sizeof(r)) < 0)
		return 1;
	nsrc = bpf_ntohs(r.nsrc);
	/* IS_INCLUDE or TO_INCLUDE with no source: nobody left listening. Any other
	 * record (EXCLUDE modes, ALLOW, INCLUDE with sources) means listening; BLOCK
	 * only prunes sources, which this switch does not track. */
	if (r.type == 1 || r.type == 3)
		membership(c->sw, c->in, c->gen, &r.group, nsrc != 0, c->now);
	else if (r.type == 2 || r.type == 4 || r.type == 5)
		membership(c->sw, c->in, c->gen, &r.group, 1, c->now);
	c->off += sizeof(r) + nsrc * 16 + r.auxlen * 4;
	return 0;
}

/*
 * An IPv6 frame to a multicast MAC: learn from it if it is MLD, and say where
 * it goes (enum mode; the group for TO_MEMBERS in c->group).
 */
static __always_inline __u32 mld_snoop(struct __sk_buff *skb, struct ipv6hdr *ip6, __u32 sw,
				       struct port *p, struct flood_ctx *c)
{
	__u32 off = sizeof(struct ethhdr) + sizeof(*ip6);
	__u8 next = ip6->nexthdr;
	__u8 hop[2], type;
	struct in6_addr group;
	struct mark router = { .gen = p->gen, .seen = c->now };

	__builtin_memcpy(&c->group, &ip6->daddr, sizeof(c->group));
	if (c->group.in6_u.u6_addr32[0] == bpf_htonl(0xff020000) &&
	    c->group.in6_u.u6_addr32[1] == 0 && c->group.in6_u.u6_addr32[2] == 0 &&
	    c->group.in6_u.u6_addr32[3] == bpf_htonl(1))
		return FLOOD_ALL; /* all nodes: never snooped (RFC 4541) */
	if (next == 0) { /* hop-by-hop options, as MLD carries its router alert */
		if (bpf_skb_load_bytes(skb, off, hop, 2) < 0)
			return TO_MEMBERS;
		next = hop[0];
		off += (hop[1] + 1) * 8;
	}
	if (next == 103) { /* PIM: a multicast router is behind this port */
		bpf_map_update_elem(&sw_mrouter, &c->in, &router, BPF_ANY);
		if (!(p->flags & PORT_TRUNK))
			list_port(&ROUTERS, c->in);
		return FLOOD_ALL;
	}
	if (next != 58 || bpf_skb_load_bytes(skb, off, &type, 1) < 0)
		return TO_MEMBERS;
	if (p->flags & PORT_TRUNK)
		return type == 130 ? FLOOD_ALL : type == 131 || type == 132 || type == 143 ?
			TO_ROUTERS : TO_MEMBERS; /* learnt at the edge only */
	switch (type) {
	case 130: /* query: a querier (a multicast router) is behind this port */
		bpf_map_update_elem(&sw_mrouter, &c->in, &router, BPF_ANY);
		list_port(&ROUTERS, c->in);
		return FLOOD_ALL;
	case 131: /* MLDv1 report */
	case 132: /* MLDv1 done */
		if (bpf_skb_load_bytes(skb, off + 8, &group, sizeof(group)) == 0)
			membership(sw, c->in, p->gen, &group, type == 131, c->now);
		return TO_ROUTERS;
	case 143: { /* MLDv2 report */
		__be16 nrec;
		struct mld2_ctx m = {
			.skb = skb, .off = off + 8, .sw = sw, .in = c->in, .gen = p->gen,
			.now = c->now,
		};

		if (bpf_skb_load_bytes(skb, off + 6, &nrec, 2) == 0)
			bpf_loop(bpf_ntohs(nrec) < MAX_RECORDS ? bpf_ntohs(nrec) : MAX_RECORDS,
				 mld2_record, &m, 0);
		return TO_ROUTERS;
	}
	default:
		return TO_MEMBERS;
	}
}

SEC("tc")
int l2switch(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	__u32 in = skb->ifindex;
	struct fdb_key src = {}, dst = {};
	struct flood_ctx c = {};
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
	if (!s) {
		count(SWITCH_DOWN, 1);
		return TC_ACT_SHOT;
	}
	now = bpf_ktime_get_ns();
	c.skb = skb;
	c.sw = src.sw;
	c.in = in;
	c.now = now;
	if ((s->flags & SW_SNOOP) && dst.mac[0] == 0x33 && dst.mac[1] == 0x33 &&
	    eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) <= end)
			c.mode = mld_snoop(skb, ip6, src.sw, p, &c);
		if (c.mode != FLOOD_ALL) {
			__u32 zero = 0;
			struct scratch *sc = bpf_map_lookup_elem(&sw_scratch, &zero);

			if (sc) {
				__builtin_memset(sc, 0, sizeof(*sc));
				sc->all = collect(sc, &ROUTERS, 0, 1, now) ||
					  (c.mode == TO_MEMBERS &&
					   collect(sc, &c.group, MEMBERS, 0, now));
			}
		}
	}
	if (!s->up) {
		count(SWITCH_DOWN, 1);
		return TC_ACT_SHOT;
	}
	if (dst.mac[0] == 0x01 && dst.mac[1] == 0x80 && dst.mac[2] == 0xc2 &&
	    dst.mac[3] == 0 && dst.mac[4] == 0 && (dst.mac[5] & 0xf0) == 0 &&
	    dst.mac[5] != 0) {
		count(LINK_LOCAL, 1);
		return TC_ACT_SHOT;
	}
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
	__u32 slots = s->slots;

	if (slots > MAX_SLOTS)
		slots = MAX_SLOTS;
	bpf_loop(slots, flood_slot, &c, 0);
	if (!c.pending) {
		count(c.mode == FLOOD_ALL ? NO_PORT : PRUNED, 1);
		return TC_ACT_SHOT;
	}
	count(c.mode == FLOOD_ALL ? FLOODED : SNOOPED, 1);
	count(FLOOD_COPIES, c.copies + 1);
	return bpf_redirect(c.pending, 0);
}

char LICENSE[] SEC("license") = "GPL";
