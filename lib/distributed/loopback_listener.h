// A listening socket bound to a loopback address, for the rendezvous store's server: with a
// loopback MASTER_ADDR every rank is on this machine, so the store need not (and must not) accept
// connections from other machines, which it does when it binds the port itself (all interfaces).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace titan {

// Whether `address` is a loopback literal: IPv4 127.0.0.0/8 or IPv6 ::1 (a host name such as
// "localhost" is not resolved: its clients might reach another of its addresses).
bool is_loopback_literal(const std::string& address);

// A socket bound to `address`:`port` and listening, close-on-exec; its descriptor is the
// caller's to close (or to hand over). Requires: is_loopback_literal(address). Throws
// std::system_error with the reason (EADDRINUSE for a port in use).
int listen_on_loopback(const std::string& address, uint16_t port);

// A mark that this machine's rank 0 serves the rendezvous store on `port`: an abstract Unix
// socket named after the port, which the kernel removes when the process ends. Lets a second
// process started as rank 0 on this machine tell the first one's store apart from another
// program holding the port, without speaking the store's protocol to that program. Returns the
// mark's descriptor (the caller closes it), or -1 when another process holds the mark.
int mark_rendezvous_server(uint16_t port);

// Whether a process on this machine holds the mark for `port`.
bool rendezvous_server_marked(uint16_t port);

}  // namespace titan
