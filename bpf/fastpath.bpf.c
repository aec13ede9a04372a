// SPDX-License-Identifier: GPL-2.0
/*
 * fidelnet's XDP fast path for forwarding nodes.
 *
 * Attached to every interface of a router that asks for it
 * (`fastpath: xdp`). For each IPv4 or IPv6 packet it asks the kernel's own
 * FIB and neighbour table where the packet goes (bpf_fib_lookup), and when
 * the answer is "forward to this neighbour through that interface" and that
 * interface is in `fastpath_ports` (the router's interfaces whose egress
 * has no qdisc of its own), it decrements the TTL, rewrites the Ethernet
 * addresses and redirects the frame there without it entering the stack.
 *
 * Everything else goes up the normal path (XDP_PASS), so the kernel handles
 * it as usual: non-IP frames (ARP), packets for the router itself, TTL
 * expiry and every ICMP error, IPv4 options and fragments, destinations
 * without a route or a resolved neighbour, packets too big for the egress
 * MTU, link-local and multicast IPv6, and egress interfaces that shape with
 * tc. What the fast path bypasses for the packets it forwards: netfilter
 * (iptables/nftables FORWARD and NAT), tc on the router's egress, and the
 * stack's forwarding counters. Routes, addresses and ARP stay ordinary
 * kernel state.
 *
 * Counters per CPU in `fastpath_stats`: see enum below.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define AF_INET 2
#define AF_INET6 10
#define IPV6_FLOWINFO_MASK bpf_htonl(0x0FFFFFFF)

enum counter {
	FORWARDED = 0,
	NOT_IP,
	TTL_EXPIRED,
	OPTIONS_OR_FRAGMENT,
	KERNEL_PATH, /* local, no route, no neighbour, MTU, forwarding off */
	EGRESS_SHAPED, /* the egress interface is not a fast-path port */
	LINK_LOCAL,
	COUNTERS,
};

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 512);
} fastpath_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, COUNTERS);
} fastpath_stats SEC(".maps");

static __always_inline int pass(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&fastpath_stats, &why);

	if (n)
		*n += 1;
	return XDP_PASS;
}

/* RFC 1624 incremental update for a TTL decrement (as the kernel's
 * ip_decrease_ttl). */
static __always_inline void decrease_ttl(struct iphdr *iph)
{
	__u32 check = (__u32)iph->check;

	check += (__u32)bpf_htons(0x0100);
	iph->check = (__sum16)(check + (check >= 0xFFFF));
	iph->ttl--;
}

SEC("xdp")
int fidelnet_fastpath(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct bpf_fib_lookup fib = {};
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6h = 0;
	struct iphdr *iph = 0;
	__u64 *n;
	__u32 key;
	int rc;

	if ((void *)(eth + 1) > data_end)
		return pass(NOT_IP);
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		iph = (void *)(eth + 1);
		if ((void *)(iph + 1) > data_end)
			return pass(NOT_IP);
		if (iph->ihl != 5 || (iph->frag_off & bpf_htons(0x3FFF)))
			return pass(OPTIONS_OR_FRAGMENT);
		if (iph->ttl <= 1)
			return pass(TTL_EXPIRED);
		fib.family = AF_INET;
		fib.tos = iph->tos;
		fib.l4_protocol = iph->protocol;
		fib.tot_len = bpf_ntohs(iph->tot_len);
		fib.ipv4_src = iph->saddr;
		fib.ipv4_dst = iph->daddr;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		ip6h = (void *)(eth + 1);
		if ((void *)(ip6h + 1) > data_end)
			return pass(NOT_IP);
		if (ip6h->daddr.s6_addr[0] == 0xff ||
		    (ip6h->daddr.s6_addr[0] == 0xfe && (ip6h->daddr.s6_addr[1] & 0xc0) == 0x80) ||
		    (ip6h->saddr.s6_addr[0] == 0xfe && (ip6h->saddr.s6_addr[1] & 0xc0) == 0x80))
			return pass(LINK_LOCAL);
		if (ip6h->hop_limit <= 1)
			return pass(TTL_EXPIRED);
		fib.family = AF_INET6;
		fib.flowinfo = *(__be32 *)ip6h & IPV6_FLOWINFO_MASK;
		fib.l4_protocol = ip6h->nexthdr;
		fib.tot_len = bpf_ntohs(ip6h->payload_len);
		__builtin_memcpy(fib.ipv6_src, &ip6h->saddr, sizeof(fib.ipv6_src));
		__builtin_memcpy(fib.ipv6_dst, &ip6h->daddr, sizeof(fib.ipv6_dst));
	} else {
		return pass(NOT_IP);
	}
	fib.ifindex = ctx->ingress_ifindex;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return pass(KERNEL_PATH);
	if (!bpf_map_lookup_elem(&fastpath_ports, &fib.ifindex))
		return pass(EGRESS_SHAPED);
	/* The pointers again, bounds-checked, so the verifier sees each path. */
	if (fib.family == AF_INET) {
		iph = (void *)(eth + 1);
		if ((void *)(iph + 1) > data_end)
			return pass(NOT_IP);
		decrease_ttl(iph);
	} else {
		ip6h = (void *)(eth + 1);
		if ((void *)(ip6h + 1) > data_end)
			return pass(NOT_IP);
		ip6h->hop_limit--;
	}
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	key = FORWARDED;
	n = bpf_map_lookup_elem(&fastpath_stats, &key);
	if (n)
		*n += 1;
	return bpf_redirect_map(&fastpath_ports, fib.ifindex, XDP_PASS);
}

/* bpf_fib_lookup and bpf_redirect_map are GPL-only helpers. */
char _license[] SEC("license") = "GPL";
