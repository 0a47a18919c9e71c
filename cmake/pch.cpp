// The source of the titan_pch target (lib/CMakeLists.txt): it only carries the precompiled headers.
