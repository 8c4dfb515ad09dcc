# Install rules (included by CMakeLists.txt when EMBER_INSTALL is on): headers, the libraries,
# the ember command, one pkg-config file per library and the CMake package lib/cmake/Ember.
include(CMakePackageConfigHelpers)
set(EMBER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Ember)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ember DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${EMBER_GEN}/include/ember/ops_gen.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember)
# One export set for the shared libraries, which need nothing from their users' builds; one per
# static library, which needs its dependencies' link flags (EmberConfig.cmake looks for them and
# loads a static library's targets only when it finds them).
install(TARGETS ember_shared ember_pt_shared ember_data_shared ember_train_shared
        EXPORT EmberTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT EmberTargets NAMESPACE Ember:: DESTINATION ${EMBER_CMAKE_DIR})
foreach(spec "ember_static|EmberStaticTargets" "ember_pt_static|EmberPtStaticTargets"
             "ember_data_static|EmberDataStaticTargets" "ember_train_static|EmberTrainStaticTargets")
  string(REPLACE "|" ";" spec "${spec}")
  list(GET spec 0 t)
  list(GET spec 1 set)
  install(TARGETS ${t} EXPORT ${set} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT ${set} NAMESPACE Ember:: DESTINATION ${EMBER_CMAKE_DIR})
endforeach()
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

# pkg-config: ember.pc for the core, ember-pt.pc, ember-data.pc and ember-train.pc for the
# components (each Requires the core). A library's own dependencies are pkg-config modules in
# Requires.private, so `pkg-config --static --libs ember-data` lists everything a static link
# needs. The files find their prefix relative to themselves, so an installed tree can move.
file(RELATIVE_PATH EMBER_PC_REL_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/ember.pc.in ${PROJECT_BINARY_DIR}/ember.pc @ONLY)
set(EMBER_PC_FILES ${PROJECT_BINARY_DIR}/ember.pc)
foreach(spec "pt|the PyTorch .pt/.pth reader|libzip"
             "data|data sets, images and loaders|zlib libpng libjpeg sqlite3"
             "train|the learner, its dashboard and run records|ncursesw")
  string(REPLACE "|" ";" spec "${spec}")
  list(GET spec 0 EMBER_PC_COMPONENT)
  list(GET spec 1 EMBER_PC_DESCRIPTION)
  list(GET spec 2 EMBER_PC_REQUIRES_PRIVATE)
  configure_file(${PROJECT_SOURCE_DIR}/ember-component.pc.in
                 ${PROJECT_BINARY_DIR}/ember-${EMBER_PC_COMPONENT}.pc @ONLY)
  list(APPEND EMBER_PC_FILES ${PROJECT_BINARY_DIR}/ember-${EMBER_PC_COMPONENT}.pc)
endforeach()
install(FILES ${EMBER_PC_FILES} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
