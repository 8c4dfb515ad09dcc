# Install rules (included by CMakeLists.txt when EMBER_INSTALL is on): headers, the libraries,
# the ember command, pkg-config's ember.pc and the CMake package lib/cmake/Ember.
include(CMakePackageConfigHelpers)
set(EMBER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Ember)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ember DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Two export sets: the shared library needs nothing from its users' builds, the static one the
# dependencies' link flags (EmberConfig.cmake finds them before loading its targets).
install(TARGETS ember_shared EXPORT EmberTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ember_static EXPORT EmberStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT EmberTargets NAMESPACE Ember:: DESTINATION ${EMBER_CMAKE_DIR})
install(EXPORT EmberStaticTargets NAMESPACE Ember:: DESTINATION ${EMBER_CMAKE_DIR})
if(EMBER_PROGRAMS)
  install(TARGETS ember_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/EmberConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/EmberConfig.cmake
                              INSTALL_DESTINATION ${EMBER_CMAKE_DIR})
# Before 1.0 a minor version may change the API: only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/EmberConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/EmberConfig.cmake ${PROJECT_BINARY_DIR}/EmberConfigVersion.cmake
        DESTINATION ${EMBER_CMAKE_DIR})

# pkg-config: the dependencies as pkg-config modules (Requires.private), so
# `pkg-config --static --libs ember` lists everything a static link needs. The file finds its
# prefix relative to itself, so an installed tree can move.
set(EMBER_PC_REQUIRES_PRIVATE "libzip zlib libpng libjpeg sqlite3 ncursesw")
file(RELATIVE_PATH EMBER_PC_REL_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/ember.pc.in ${PROJECT_BINARY_DIR}/ember.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ember.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
