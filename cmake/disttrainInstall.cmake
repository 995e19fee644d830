# Install rules: headers and the exported INTERFACE target.
# (Packaging details: config file with components, version file, pkg-config.)
install(DIRECTORY include/disttrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS disttrain EXPORT disttrainTargets)
install(EXPORT disttrainTargets NAMESPACE disttrain:: DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/disttrain)
