/*
 * orlinkemu.c - delay, jitter, loss and rate on a network interface's
 * egress, without the kernel's netem (sch_netem).
 *
 * Usage: orlinkemu [--delay TIME] [--jitter TIME] [--loss PERCENT]
 *                  [--rate BYTES/S] [--limit BYTES] [--reorder] [--seed N]
 *                  [--foreground] DEV
 *        orlinkemu --stop DEV
 *        orlinkemu --stats DEV
 *
 * How: every frame DEV sends is taken from its egress by a tc filter
 * (clsact, a classic BPF match and act_mirred) and redirected into a veth
 * pair made for it; this program reads the frames from the pair's other end
 * (an AF_PACKET socket), holds each until its time has come and sends it on
 * DEV (another AF_PACKET socket, past DEV's qdiscs and filters: a rate is
 * this program's --rate, as a tbf on DEV would not see the frames). All of
 * it stays inside the host (its network namespace): the one place orrun
 * --emulate-links reaches through its launcher, as on a real cluster, where
 * the switch is out of reach. The frames keep their offload state
 * (PACKET_VNET_HDR: segmentation and checksum are done when they leave),
 * so TCP's 64 KiB segments cross as one.
 *
 * A frame leaves DELAY +- JITTER (uniform) after it was sent, never before
 * the frame ahead of it unless --reorder; with --rate, not before the
 * frames ahead have left at that rate. LOSS percent of the frames are
 * dropped at random, and so is a frame that would make the queue hold more
 * than LIMIT bytes (default 16 MiB). One thread, no busy-waiting: poll on the
 * sockets, a timerfd set to the next frame's time, a signalfd and a control
 * socket.
 *
 * The control socket is an abstract Unix socket named after DEV, so it
 * belongs to the network namespace: one emulator per interface and host.
 * --stop asks the emulator to remove the filter and the veth pair, and
 * waits until it has (or removes what a killed one left); --stats prints its
 * counters. Without --foreground the emulator goes to the background once
 * DEV is being emulated. SIGTERM and SIGINT stop it as --stop does.
 *
 * Exit status: 0; 1 when it cannot emulate (not root, no DEV, already
 * running, tc refuses) or, for --stop/--stats, no emulator runs on DEV; 2 on
 * a bad command line.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The filter's preference on DEV's egress: ahead of filters added without one. */
#define EMU_PREF "7"
/* The largest frame: a 64 KiB GSO segment and its headers (BIG TCP is larger: truncated ones are dropped). */
#define FRAME_MAX (256 * 1024)
#define QUEUE_MAX 65536 /* frames held at once */

typedef struct {
    double delay_ns, jitter_ns, loss, rate;
    long long limit;
    bool reorder, foreground;
    unsigned long long seed;
    const char *dev;
} emu_options;

typedef struct {
    uint64_t due; /* CLOCK_MONOTONIC ns */
    uint64_t seq; /* arrival order, ties and FIFO */
    uint32_t len; /* vnet header and frame */
    unsigned char data[];
} frame;

typedef struct {
    emu_options o;
    char tap_in[IFNAMSIZ], tap_out[IFNAMSIZ]; /* the veth pair: redirected into in, read from out */
    bool made_clsact;
    int rx, tx, timer, sig, ctl;
    frame **heap;
    size_t count;
    long long bytes, max_bytes;
    uint64_t seq, last_due, rng;
    unsigned long long forwarded, fwd_bytes, lost, overflow, send_errors, truncated;
} emu;

static void usage(FILE *to)
{
    fprintf(to,
            "Usage: orlinkemu [--delay TIME] [--jitter TIME] [--loss PERCENT] [--rate BYTES/S]\n"
            "                 [--limit BYTES] [--reorder] [--seed N] [--foreground] DEV\n"
            "       orlinkemu --stop DEV\n"
            "       orlinkemu --stats DEV\n"
            "Delays the frames DEV sends by TIME +- jitter (uniform), drops PERCENT of them\n"
            "at random and, with --rate, lets them leave at that rate; without netem.\n"
            "TIME: a number with ns, us, ms or s (2ms, 500us); BYTES/S and BYTES: a number\n"
            "with k, M or G (powers of 1000 for rates, of 1024 for --limit).\n"
            "  --limit BYTES   most bytes held at once, beyond which frames are dropped\n"
            "                  (default 16M)\n"
            "  --reorder       a frame may overtake one with a longer delay (default: frames\n"
            "                  leave in order, as on a wire)\n"
            "  --seed N        the loss and jitter sequence (default: from the clock)\n"
            "  --foreground    stay in the foreground (default: background once running)\n"
            "  --stop DEV      stop the emulator of DEV and remove its filter and veth pair\n"
            "  --stats DEV     print the emulator's counters\n");
}

static void bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "orlinkemu: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    exit(2);
}

/* "2ms" -> 2e6 ns; negative if not a time. */
static double parse_time(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0 || v != v)
        return -1;
    static const struct { const char *unit; double ns; } units[] = {
        {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0)
            return v * units[i].ns > 60e9 ? -1 : v * units[i].ns;
    return -1;
}

/* "50M" -> 5e7 with base 1000 (1024 for sizes); negative if not a number. */
static double parse_amount(const char *s, double base, const char *tail)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0 || v != v)
        return -1;
    double m = 1;
    if (*end == 'k' || *end == 'K')
        m = base, end++;
    else if (*end == 'M')
        m = base * base, end++;
    else if (*end == 'G')
        m = base * base * base, end++;
    if (*end && !(tail && strcmp(end, tail) == 0))
        return -1;
    return v * m;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* xorshift64*: uniform in [0, 1). */
static double uniform(emu *e)
{
    e->rng ^= e->rng >> 12;
    e->rng ^= e->rng << 25;
    e->rng ^= e->rng >> 27;
    return (double)((e->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* Run a program (ip, tc) with its output on our stderr; its exit status. */
static int run(const char *const argv[], bool quiet)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (quiet) {
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) {
                dup2(null, STDOUT_FILENO);
                dup2(null, STDERR_FILENO);
            }
        } else {
            dup2(STDERR_FILENO, STDOUT_FILENO);
        }
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "orlinkemu: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- the control socket ------------------------------------------------------- */

static socklen_t control_address(const char *dev, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "orlinkemu/%s", dev);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* --stop and --stats: send the word, print what comes back until the
 * emulator closes. Returns -1 if no emulator listens. */
static int ask(const char *dev, const char *word)
{
    struct sockaddr_un a;
    socklen_t len = control_address(dev, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (write(fd, word, strlen(word)) < 0) {
        close(fd);
        return -1;
    }
    /* An emulator that does not answer within 30 s is not waited for longer. */
    struct timeval limit = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    char buf[512];
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR))
        if (got > 0)
            fwrite(buf, 1, (size_t)got, stdout);
    close(fd);
    return 0;
}

/* ---- plumbing: the veth pair and the filter ------------------------------------ */

static void pair_names(const char *dev, char *in, char *out)
{
    unsigned idx = if_nametoindex(dev);
    snprintf(in, IFNAMSIZ, "orlk%ui", idx);
    snprintf(out, IFNAMSIZ, "orlk%uo", idx);
}

/* Remove the filter and the pair (whatever of them exists). */
static void unplumb(const char *dev, const char *in, bool del_clsact)
{
    run((const char *const[]){"tc", "filter", "del", "dev", dev, "egress", "pref", EMU_PREF, NULL},
        true);
    if (del_clsact)
        run((const char *const[]){"tc", "qdisc", "del", "dev", dev, "clsact", NULL}, true);
    run((const char *const[]){"ip", "link", "del", in, NULL}, true);
}

static int plumb(emu *e)
{
    const char *dev = e->o.dev;
    pair_names(dev, e->tap_in, e->tap_out);
    unplumb(dev, e->tap_in, false); /* a killed emulator's leftovers */
    if (run((const char *const[]){"ip", "link", "add", e->tap_in, "type", "veth", "peer", "name",
                                  e->tap_out, NULL}, false) != 0) {
        fprintf(stderr, "orlinkemu: cannot make the veth pair %s/%s\n", e->tap_in, e->tap_out);
        return -1;
    }
    /* No IPv6 link-local chatter of their own (best effort: IPv6 may be off). */
    run((const char *const[]){"ip", "link", "set", e->tap_in, "addrgenmode", "none", NULL}, true);
    run((const char *const[]){"ip", "link", "set", e->tap_out, "addrgenmode", "none", NULL}, true);
    if (run((const char *const[]){"ip", "link", "set", e->tap_in, "up", NULL}, false) != 0 ||
        run((const char *const[]){"ip", "link", "set", e->tap_out, "up", NULL}, false) != 0)
        goto undo;
    e->made_clsact =
        run((const char *const[]){"tc", "qdisc", "add", "dev", dev, "clsact", NULL}, true) == 0;
    /* Classic BPF: every frame is a match (-1), and mirred redirects it
     * into the pair. What this program sends bypasses DEV's egress hooks
     * (PACKET_QDISC_BYPASS): it is not taken again. */
    const char *bytecode = "1,6 0 0 4294967295";
    if (run((const char *const[]){"tc", "filter", "add", "dev", dev, "egress", "pref", EMU_PREF,
                                  "bpf", "bytecode", bytecode, "action", "mirred", "egress",
                                  "redirect", "dev", e->tap_in, NULL}, false) != 0) {
        fprintf(stderr,
                "orlinkemu: cannot redirect %s's egress with tc (it needs clsact, cls_bpf and "
                "act_mirred)\n", dev);
        goto undo;
    }
    return 0;
undo:
    unplumb(dev, e->tap_in, e->made_clsact);
    return -1;
}

static int packet_socket(const char *dev, int protocol, bool vnet)
{
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
    if (fd < 0)
        return -1;
    int one = 1;
    struct sockaddr_ll a;
    memset(&a, 0, sizeof a);
    a.sll_family = AF_PACKET;
    a.sll_protocol = (unsigned short)protocol;
    a.sll_ifindex = (int)if_nametoindex(dev);
    if ((vnet && setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0) ||
        (protocol == 0 && setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) != 0) ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- the queue: a min-heap on (due, seq) ------------------------------------------ */

static bool before(const frame *a, const frame *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_push(emu *e, frame *f)
{
    size_t i = e->count++;
    while (i > 0 && before(f, e->heap[(i - 1) / 2])) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = f;
}

static frame *heap_pop(emu *e)
{
    frame *top = e->heap[0], *last = e->heap[--e->count];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= e->count)
            break;
        if (c + 1 < e->count && before(e->heap[c + 1], e->heap[c]))
            c++;
        if (!before(e->heap[c], last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (e->count > 0)
        e->heap[i] = last;
    return top;
}

static void arm_timer(emu *e)
{
    struct itimerspec t;
    memset(&t, 0, sizeof t);
    if (e->count > 0) {
        uint64_t due = e->heap[0]->due ? e->heap[0]->due : 1;
        t.it_value.tv_sec = (time_t)(due / 1000000000u);
        t.it_value.tv_nsec = (long)(due % 1000000000u);
    }
    timerfd_settime(e->timer, TFD_TIMER_ABSTIME, &t, NULL);
}

/* Take every frame waiting on the pair; each is lost, dropped or queued. */
static void receive(emu *e)
{
    static unsigned char buf[FRAME_MAX];
    for (;;) {
        struct sockaddr_ll from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(e->rx, buf, sizeof buf, MSG_TRUNC, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return; /* EAGAIN: all taken */
        if (from.sll_pkttype == PACKET_OUTGOING)
            continue;
        if ((size_t)n > sizeof buf) {
            e->truncated++;
            continue;
        }
        if ((size_t)n < sizeof(struct virtio_net_hdr) + ETH_HLEN)
            continue;
        if (e->o.loss > 0 && uniform(e) * 100 < e->o.loss) {
            e->lost++;
            continue;
        }
        if (e->count == QUEUE_MAX || e->bytes + n > e->o.limit) {
            e->overflow++;
            continue;
        }
        frame *f = malloc(sizeof *f + (size_t)n);
        if (!f) {
            e->overflow++;
            continue;
        }
        memcpy(f->data, buf, (size_t)n);
        /* Checked already, and the sending side does not take it. */
        ((struct virtio_net_hdr *)f->data)->flags &= (uint8_t)~VIRTIO_NET_HDR_F_DATA_VALID;
        f->len = (uint32_t)n;
        f->seq = e->seq++;
        uint64_t now = now_ns();
        double d = e->o.delay_ns;
        if (e->o.jitter_ns > 0)
            d += (2 * uniform(e) - 1) * e->o.jitter_ns;
        uint64_t due = now + (d > 0 ? (uint64_t)d : 0);
        if (!e->o.reorder && due < e->last_due)
            due = e->last_due;
        if (e->o.rate > 0) {
            /* Serialised behind the frames ahead: they leave at the rate. */
            uint64_t wire = (uint64_t)((double)(n - (ssize_t)sizeof(struct virtio_net_hdr)) /
                                       e->o.rate * 1e9);
            if (due < e->last_due + wire)
                due = e->last_due + wire;
        }
        if (due > e->last_due)
            e->last_due = due;
        f->due = due;
        heap_push(e, f);
        e->bytes += n;
        if (e->bytes > e->max_bytes)
            e->max_bytes = e->bytes;
    }
}

/* Send every frame whose time has come (all of them with flush). */
static void send_due(emu *e, bool flush)
{
    uint64_t now = now_ns();
    while (e->count > 0 && (flush || e->heap[0]->due <= now)) {
        frame *f = heap_pop(e);
        ssize_t n;
        do
            n = send(e->tx, f->data, f->len, 0);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
            /* ENOBUFS: DEV's qdisc is full, a drop as a switch's; EAGAIN
             * likewise (a moment's backlog is not worth a wait). */
            e->send_errors++;
        } else {
            e->forwarded++;
            e->fwd_bytes += f->len - sizeof(struct virtio_net_hdr);
        }
        e->bytes -= f->len;
        free(f);
    }
}

static void stats(const emu *e, char *buf, size_t size)
{
    snprintf(buf, size,
             "orlinkemu %s: delay %.6g us jitter %.6g us loss %.6g%% rate %.6g B/s: "
             "forwarded %llu frames %llu bytes, lost %llu, overflow %llu, send errors %llu, "
             "too large %llu, queued %zu (%lld bytes, at most %lld)\n",
             e->o.dev, e->o.delay_ns / 1e3, e->o.jitter_ns / 1e3, e->o.loss, e->o.rate,
             e->forwarded, e->fwd_bytes, e->lost, e->overflow, e->send_errors, e->truncated,
             e->count, e->bytes, e->max_bytes);
}

/* A control connection: "stats" is answered, "stop" ends the loop (the
 * connection is answered once the plumbing is gone). Returns the fd to
 * answer after stopping, or -1. */
static int control(emu *e, bool *stop)
{
    int c = accept4(e->ctl, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return -1;
    /* The word arrives with the connection (the client writes at once);
     * a client too slow for 1 s is dropped rather than waited on. */
    struct pollfd p = {c, POLLIN, 0};
    char word[16] = "";
    if (poll(&p, 1, 1000) == 1) {
        ssize_t n = read(c, word, sizeof word - 1);
        word[n > 0 ? n : 0] = '\0';
    }
    if (strncmp(word, "stop", 4) == 0) {
        *stop = true;
        return c;
    }
    if (strncmp(word, "stats", 5) == 0) {
        char buf[512];
        stats(e, buf, sizeof buf);
        if (write(c, buf, strlen(buf)) < 0) {
            /* the client has gone: nothing to tell */
        }
    }
    close(c);
    return -1;
}

static int serve(emu *e, int ready_fd)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    e->sig = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    e->timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    e->heap = calloc(QUEUE_MAX, sizeof *e->heap);
    if (e->sig < 0 || e->timer < 0 || !e->heap) {
        fprintf(stderr, "orlinkemu: cannot set up its loop: %s\n", strerror(errno));
        return 1;
    }
    if (plumb(e) != 0)
        return 1;
    e->rx = packet_socket(e->tap_out, htons(ETH_P_ALL), true);
    e->tx = packet_socket(e->o.dev, 0, true);
    int rcvbuf = 8 << 20;
    if (e->rx < 0 || e->tx < 0) {
        fprintf(stderr, "orlinkemu: cannot open packet sockets on %s and %s: %s\n", e->o.dev,
                e->tap_out, strerror(errno));
        unplumb(e->o.dev, e->tap_in, e->made_clsact);
        return 1;
    }
    setsockopt(e->rx, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    fprintf(stderr,
            "orlinkemu: %s: delay %.6g us, jitter %.6g us, loss %.6g%%, rate %.6g MB/s, "
            "through %s\n",
            e->o.dev, e->o.delay_ns / 1e3, e->o.jitter_ns / 1e3, e->o.loss, e->o.rate / 1e6,
            e->tap_in);
    if (ready_fd >= 0) {
        /* Running: the starter may return, and nothing of ours stays on its output. */
        if (write(ready_fd, "", 1) < 0) {
            /* the starter has gone: carry on */
        }
        close(ready_fd);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            close(null);
        }
    }
    bool stop = false;
    int answer = -1;
    while (!stop) {
        struct pollfd p[4] = {{e->rx, POLLIN, 0}, {e->timer, POLLIN, 0}, {e->ctl, POLLIN, 0},
                              {e->sig, POLLIN, 0}};
        if (poll(p, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[3].revents) {
            struct signalfd_siginfo si;
            while (read(e->sig, &si, sizeof si) > 0)
                stop = true;
        }
        if (p[0].revents)
            receive(e);
        if (p[1].revents) {
            uint64_t ticks;
            while (read(e->timer, &ticks, sizeof ticks) > 0)
                ;
        }
        if (p[2].revents)
            answer = control(e, &stop);
        send_due(e, false);
        arm_timer(e);
    }
    /* The filter first, so nothing more goes into the pair; what is queued
     * leaves now rather than never. */
    run((const char *const[]){"tc", "filter", "del", "dev", e->o.dev, "egress", "pref", EMU_PREF,
                              NULL}, true);
    receive(e);
    send_due(e, true);
    unplumb(e->o.dev, e->tap_in, e->made_clsact);
    /* Free the name before answering: once --stop returns, a new emulator may start. */
    close(e->ctl);
    if (answer >= 0) {
        char buf[512];
        stats(e, buf, sizeof buf);
        if (write(answer, buf, strlen(buf)) < 0) {
            /* the client has gone */
        }
        close(answer);
    }
    free(e->heap);
    return 0;
}

int main(int argc, char **argv)
{
    emu e;
    memset(&e, 0, sizeof e);
    e.o.limit = 16 << 20;
    e.o.seed = (unsigned long long)now_ns() ^ (unsigned long long)getpid() << 32;
    const char *action = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--reorder") == 0) {
            e.o.reorder = true, takes = false;
        } else if (strcmp(a, "--foreground") == 0) {
            e.o.foreground = true, takes = false;
        } else if (strcmp(a, "--stop") == 0 || strcmp(a, "--stats") == 0) {
            action = a + 2, takes = false;
        } else if (a[0] == '-' && a[1] == '-' && !v) {
            bad_usage("%s needs a value", a);
        } else if (strcmp(a, "--delay") == 0) {
            if ((e.o.delay_ns = parse_time(v)) < 0)
                bad_usage("--delay '%s': expected a time up to 60 s, as 2ms or 500us", v);
        } else if (strcmp(a, "--jitter") == 0) {
            if ((e.o.jitter_ns = parse_time(v)) < 0)
                bad_usage("--jitter '%s': expected a time up to 60 s, as 2ms or 500us", v);
        } else if (strcmp(a, "--loss") == 0) {
            char *end;
            e.o.loss = strtod(v, &end);
            if (end == v || (*end && strcmp(end, "%") != 0) || !(e.o.loss >= 0 && e.o.loss <= 100))
                bad_usage("--loss '%s': expected a percentage from 0 to 100", v);
        } else if (strcmp(a, "--rate") == 0) {
            if ((e.o.rate = parse_amount(v, 1000, "B/s")) < 0)
                bad_usage("--rate '%s': expected bytes per second, as 50M or 50MB/s", v);
        } else if (strcmp(a, "--limit") == 0) {
            double l = parse_amount(v, 1024, NULL);
            if (l < 65536 + 64 || l > (double)(1LL << 40))
                bad_usage("--limit '%s': expected a size from 64K to 1T bytes, as 16M", v);
            e.o.limit = (long long)l;
        } else if (strcmp(a, "--seed") == 0) {
            char *end;
            e.o.seed = strtoull(v, &end, 0);
            if (end == v || *end)
                bad_usage("--seed '%s': expected an integer", v);
        } else if (a[0] == '-') {
            bad_usage("unknown option '%s'", a);
        } else if (!e.o.dev && i == argc - 1) {
            e.o.dev = a, takes = false;
        } else {
            bad_usage("unexpected '%s': the interface comes last, once", a);
        }
        if (takes)
            i++;
    }
    if (!e.o.dev)
        bad_usage("%s", "which interface? (DEV)");
    if (strlen(e.o.dev) >= IFNAMSIZ || strchr(e.o.dev, '/'))
        bad_usage("'%s' is not an interface name", e.o.dev);
    e.rng = e.o.seed * 0x9e3779b97f4a7c15ull | 1;

    if (action) {
        if (ask(e.o.dev, action) == 0)
            return 0;
        if (strcmp(action, "stop") == 0 && if_nametoindex(e.o.dev) != 0) {
            /* None runs: remove what a killed one may have left. */
            char in[IFNAMSIZ], out[IFNAMSIZ];
            pair_names(e.o.dev, in, out);
            if (if_nametoindex(in) != 0) {
                unplumb(e.o.dev, in, false);
                fprintf(stderr, "orlinkemu: no emulator ran on %s: removed its filter and %s\n",
                        e.o.dev, in);
                return 0;
            }
        }
        fprintf(stderr, "orlinkemu: no emulator runs on %s here\n", e.o.dev);
        return 1;
    }
    if (geteuid() != 0) {
        fprintf(stderr, "orlinkemu: needs root (tc, veths and packet sockets)\n");
        return 1;
    }
    if (if_nametoindex(e.o.dev) == 0) {
        fprintf(stderr, "orlinkemu: no interface '%s' here\n", e.o.dev);
        return 1;
    }
    /* The control socket first: it is also the lock, one emulator per DEV. */
    struct sockaddr_un ca;
    socklen_t cl = control_address(e.o.dev, &ca);
    e.ctl = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (e.ctl < 0 || bind(e.ctl, (struct sockaddr *)&ca, cl) != 0 || listen(e.ctl, 8) != 0) {
        if (errno == EADDRINUSE)
            fprintf(stderr, "orlinkemu: an emulator already runs on %s ('orlinkemu --stop %s' "
                            "first)\n", e.o.dev, e.o.dev);
        else
            fprintf(stderr, "orlinkemu: cannot make its control socket: %s\n", strerror(errno));
        return 1;
    }
    if (e.o.foreground)
        return serve(&e, -1);

    /* Background: the child runs; the parent waits until it is emulating
     * (a byte on the pipe) or has failed (the pipe closes empty). */
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        fprintf(stderr, "orlinkemu: pipe: %s\n", strerror(errno));
        return 1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "orlinkemu: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        close(ready[0]);
        setsid();
        if (chdir("/") != 0) {
            /* stays where it was started: harmless */
        }
        _exit(serve(&e, ready[1]));
    }
    close(ready[1]);
    close(e.ctl);
    char byte;
    ssize_t n;
    while ((n = read(ready[0], &byte, 1)) < 0 && errno == EINTR)
        ;
    if (n == 1)
        return 0;
    int status;
    waitpid(pid, &status, 0);
    return 1;
}
