/*
 * rtt_probe.c - round trips of small UDP datagrams between two test hosts,
 * as ping measures them (the hosts have no ping of their own to rely on).
 *
 * Usage: rtt_probe echo PORT SECONDS      answer every datagram, for SECONDS
 *        rtt_probe ping ADDRESS PORT COUNT [WAIT_MS [SIZE]]
 *
 * ping sends COUNT datagrams of SIZE bytes (default 4) one after the other
 * (the next once the answer to the last has come, or after WAIT_MS, default
 * 2000) and prints
 *   "rtt_probe: COUNT sent, R answered, min A us, median B us, max C us".
 * The first round trip is left out of the figures (it waits for ARP).
 * Exit status: 0, 1 if no answer came, 2 on a bad command line.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int echo(int port, int seconds)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        fprintf(stderr, "rtt_probe: cannot bind UDP port %d: %s\n", port, strerror(errno));
        return 1;
    }
    double end = now_us() + seconds * 1e6;
    for (double left; (left = end - now_us()) > 0;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(left / 1000) + 1) <= 0)
            continue;
        static char buf[65536];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
        if (n > 0)
            sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
    }
    close(fd);
    return 0;
}

static int ping(const char *addr, int port, int count, int wait_ms, int size)
{
    static unsigned char msg[65536], back[65536];
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    if (fd < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        fprintf(stderr, "rtt_probe: cannot reach %s:%d\n", addr, port);
        return 2;
    }
    double *rtt = calloc((size_t)count, sizeof *rtt);
    int answered = 0;
    for (int i = 0; i < count; i++) {
        unsigned seq = (unsigned)i;
        memcpy(msg, &seq, sizeof seq);
        double t0 = now_us();
        if (send(fd, msg, (size_t)size, 0) < 0) {
            usleep(100000); /* the echo side not listening yet: ICMP refused */
            continue;
        }
        for (;;) {
            struct pollfd p = {fd, POLLIN, 0};
            int left = (int)(wait_ms - (now_us() - t0) / 1000);
            if (left <= 0 || poll(&p, 1, left) <= 0)
                break;
            if (recv(fd, back, sizeof back, 0) == (ssize_t)size && memcmp(back, msg, sizeof seq) == 0) {
                if (i > 0)
                    rtt[answered++] = now_us() - t0;
                break;
            }
        }
    }
    if (answered == 0) {
        printf("rtt_probe: %d sent, 0 answered\n", count);
        free(rtt);
        return 1;
    }
    qsort(rtt, (size_t)answered, sizeof *rtt, cmp);
    printf("rtt_probe: %d sent, %d answered, min %.0f us, median %.0f us, max %.0f us\n", count,
           answered, rtt[0], rtt[answered / 2], rtt[answered - 1]);
    free(rtt);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "echo") == 0)
        return echo(atoi(argv[2]), atoi(argv[3]));
    if (argc >= 5 && argc <= 7 && strcmp(argv[1], "ping") == 0 && atoi(argv[4]) > 1) {
        int wait_ms = argc > 5 ? atoi(argv[5]) : 2000, size = argc > 6 ? atoi(argv[6]) : 4;
        if (wait_ms > 0 && size >= 4 && size <= 65000)
            return ping(argv[2], atoi(argv[3]), atoi(argv[4]), wait_ms, size);
    }
    fprintf(stderr, "usage: rtt_probe echo PORT SECONDS | "
                    "rtt_probe ping ADDRESS PORT COUNT [WAIT_MS [SIZE]]\n");
    return 2;
}
