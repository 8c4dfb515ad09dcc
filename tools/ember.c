/* The `ember` command line: version and device information for now; file tools come with the
 * store layer. */
#include <ember/ember.h>
#include <stdio.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: ember <command>\n"
                    "  version    print the library version\n"
                    "  devices    list the devices this build can use\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage();
    if (strcmp(argv[1], "version") == 0) {
        printf("ember %s\n", em_version());
        return 0;
    }
    if (strcmp(argv[1], "devices") == 0) {
        char name[32];
        em_device d = em_device_default();
        em_clear_error();
        printf("default device: %s\n", em_device_str(d, name, sizeof name));
        printf("cpu: %d threads\n", em_get_num_threads());
        return 0;
    }
    return usage();
}
