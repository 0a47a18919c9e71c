// Contract in loopback_listener.h.
#include "distributed/loopback_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <system_error>

namespace titan {
namespace {

constexpr int kBacklog = 2048;  // every rank connects at once at start

[[noreturn]] void fail(int fd, const char* what) {
  const int code = errno;
  if (fd >= 0) ::close(fd);
  throw std::system_error(code, std::generic_category(), what);
}

}  // namespace

bool is_loopback_literal(const std::string& address) {
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, address.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

int listen_on_loopback(const std::string& address, uint16_t port) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof(sockaddr_in6);
  } else {
    throw std::system_error(EINVAL, std::generic_category(), "not an IP address: " + address);
  }
  const int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(fd, "socket");
  const int on = 1;
  // As the store's own socket: a port a finished run left in TIME_WAIT can be reused at once.
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) fail(fd, "setsockopt");
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0) fail(fd, "bind");
  if (::listen(fd, kBacklog) != 0) fail(fd, "listen");
  return fd;
}

namespace {

sockaddr_un mark_address(uint16_t port, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string name = "titan-train-rendezvous:" + std::to_string(port);
  // Abstract namespace: a leading NUL, no file.
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

}  // namespace

int mark_rendezvous_server(uint16_t port) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t length = 0;
  const sockaddr_un address = mark_address(port, length);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool rendezvous_server_marked(uint16_t port) {
  const int fd = mark_rendezvous_server(port);
  if (fd < 0) return errno == EADDRINUSE;
  ::close(fd);
  return false;
}

}  // namespace titan
